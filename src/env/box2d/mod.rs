//! Gymnasium's Box2D tasks on Box2D 2.3.1 (the engine, through the wrapped2d crate):
//! LunarLander-v3, LunarLanderContinuous-v3, BipedalWalker-v3 and
//! BipedalWalkerHardcore-v3.
//!
//! Box2D computes in f32 as in Gymnasium (PyPI's box2d 2.3.10 carries the same 2.3
//! engine); what Gymnasium's Python computes in doubles around it (engine impulses,
//! observations, shaping rewards) is computed here in f64 in the same order, and the
//! random draws come from NumPy's generator seeded as Gymnasium seeds it, so a seed
//! plays Gymnasium's episode (tests/fixtures/make_box2d_fixture.py records them).

mod bipedal_walker;
mod lunar_lander;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use wrapped2d::b2;
use wrapped2d::dynamics::world::callbacks::ContactAccess;
use wrapped2d::user_data::NoUserData;

use super::numpy_rng::NumpyRng;
use super::{Action, ActionSpace, Env, Frame, Step};

/// The Box2D ids with their Gymnasium step limits.
pub const IDS: [(&str, u32); 4] = [
    ("LunarLander-v3", 1000),
    ("LunarLanderContinuous-v3", 1000),
    ("BipedalWalker-v3", 1600),
    ("BipedalWalkerHardcore-v3", 2000),
];

type World = b2::World<NoUserData>;

/// A Box2D world that moves between threads with the environment owning it.
///
/// wrapped2d's world holds raw pointers to its C++ b2World, so it is not `Send`. The
/// world is owned by one environment, reached only through `&mut self`, and Box2D 2.3
/// keeps no state outside the world (no globals, no thread-locals), so moving the whole
/// of it to another thread is sound.
struct OwnedWorld(World);

// SAFETY: see the type's comment: exclusive ownership, no state outside the world.
unsafe impl Send for OwnedWorld {}

/// The physics of one task, as the wrapper below drives it.
trait Scene: Send {
    fn action_space(&self) -> ActionSpace;
    fn observation_len(&self) -> usize;
    /// Builds an episode's bodies; returns the first observation. The first reset builds
    /// the first episode, as in Gymnasium, whose worlds this matches call for call.
    fn reset(&mut self, rng: &mut NumpyRng) -> Vec<f32>;
    /// Plays one action: the observation, the reward and whether the task ended it.
    fn step(&mut self, action: &Action, rng: &mut NumpyRng) -> (Vec<f32>, f64, bool);
    fn draw(&self) -> Frame;
    fn step_seconds(&self) -> f64;
}

/// Creates the Box2D task `id`, or `None` if `id` is not one.
pub fn make(id: &str, seed: u64) -> Option<Box<dyn Env>> {
    let &(id, max_episode_steps) = IDS.iter().find(|(known, _)| *known == id)?;
    let scene: Box<dyn Scene> = match id {
        "LunarLander-v3" => Box::new(lunar_lander::LunarLander::new(false)),
        "LunarLanderContinuous-v3" => Box::new(lunar_lander::LunarLander::new(true)),
        "BipedalWalker-v3" => Box::new(bipedal_walker::BipedalWalker::new(false)),
        "BipedalWalkerHardcore-v3" => Box::new(bipedal_walker::BipedalWalker::new(true)),
        _ => unreachable!("IDS and this match list the same tasks"),
    };
    let action_space = scene.action_space();
    let observation_shape = vec![scene.observation_len() as i64];
    Some(Box::new(Box2dEnv {
        id,
        scene,
        rng: NumpyRng::new(seed),
        action_space,
        observation_shape,
        max_episode_steps,
        elapsed_steps: 0,
        physics_steps: 0,
    }))
}

/// A task under Gymnasium's TimeLimit.
struct Box2dEnv {
    id: &'static str,
    scene: Box<dyn Scene>,
    rng: NumpyRng,
    action_space: ActionSpace,
    observation_shape: Vec<i64>,
    max_episode_steps: u32,
    elapsed_steps: u32,
    physics_steps: u64,
}

impl Env for Box2dEnv {
    fn id(&self) -> &str {
        self.id
    }

    fn action_space(&self) -> &ActionSpace {
        &self.action_space
    }

    fn observation_shape(&self) -> &[i64] {
        &self.observation_shape
    }

    fn reset(&mut self, seed: Option<u64>) -> Vec<f32> {
        if let Some(seed) = seed {
            self.rng = NumpyRng::new(seed);
        }
        self.elapsed_steps = 0;
        self.scene.reset(&mut self.rng)
    }

    fn step(&mut self, action: &Action) -> Step {
        let (observation, reward, terminated) = self.scene.step(action, &mut self.rng);
        self.elapsed_steps += 1;
        self.physics_steps += 1;
        Step {
            observation,
            reward: reward as f32,
            terminated,
            truncated: self.elapsed_steps >= self.max_episode_steps,
            lives: 0,
            life_lost: false,
        }
    }

    fn env_frames(&self) -> u64 {
        self.physics_steps
    }

    fn render(&mut self) -> Frame {
        self.scene.draw()
    }

    fn step_seconds(&self) -> f64 {
        self.scene.step_seconds()
    }
}

/// What both tasks' contact listeners report, as Gymnasium's do: a touch of the body
/// (the lander, the walker's hull) ends the episode, and each foot's ground contact is
/// observed, set when a contact begins and cleared when it ends.
#[derive(Default)]
struct Contacts {
    body_touched: AtomicBool,
    foot_on_ground: [AtomicBool; 2],
}

impl Contacts {
    fn body_touched(&self) -> bool {
        self.body_touched.load(Ordering::Relaxed)
    }

    /// 1 when the foot touches the ground, else 0, as the observation carries it.
    fn foot_on_ground(&self, foot: usize) -> f64 {
        if self.foot_on_ground[foot].load(Ordering::Relaxed) {
            1.0
        } else {
            0.0
        }
    }
}

/// The world's contact listener: marks `contacts` for the bodies it watches. Atomics
/// keep it `Send` with the world; Box2D calls it from the stepping thread only.
struct ContactWatch {
    body: b2::BodyHandle,
    feet: [b2::BodyHandle; 2],
    contacts: Arc<Contacts>,
}

impl ContactWatch {
    /// Listens to `world` for `body` and `feet`; the returned record fills as it steps.
    fn install(
        world: &mut World,
        body: b2::BodyHandle,
        feet: [b2::BodyHandle; 2],
    ) -> Arc<Contacts> {
        let contacts = Arc::new(Contacts::default());
        world.set_contact_listener(Box::new(ContactWatch {
            body,
            feet,
            contacts: Arc::clone(&contacts),
        }));
        contacts
    }

    fn mark(&self, access: &ContactAccess<NoUserData>, touching: bool) {
        let bodies = [access.body_a.handle(), access.body_b.handle()];
        if touching && bodies.contains(&self.body) {
            self.contacts.body_touched.store(true, Ordering::Relaxed);
        }
        for (foot, on_ground) in self.feet.iter().zip(&self.contacts.foot_on_ground) {
            if bodies.contains(foot) {
                on_ground.store(touching, Ordering::Relaxed);
            }
        }
    }
}

impl b2::ContactListener<NoUserData> for ContactWatch {
    fn begin_contact(&mut self, access: ContactAccess<NoUserData>) {
        self.mark(&access, true);
    }

    fn end_contact(&mut self, access: ContactAccess<NoUserData>) {
        self.mark(&access, false);
    }
}

fn vec2(x: f64, y: f64) -> b2::Vec2 {
    b2::Vec2 { x: x as f32, y: y as f32 }
}
