//! Gymnasium's Box2D tasks on Box2D 2.3.1 (the engine, through the wrapped2d crate):
//! LunarLander-v3, LunarLanderContinuous-v3, BipedalWalker-v3 and
//! BipedalWalkerHardcore-v3.
//!
//! Box2D computes in f32 as in Gymnasium (whose PyPI box2d 2.3.10 carries Box2D 2.3.0
//! with patches: the two differ in contacts, docs/envs.md); what Gymnasium's Python
//! computes in doubles around it (engine impulses, observations, shaping rewards) is
//! computed here in f64 in the same order, and the random draws come from NumPy's
//! generator seeded as Gymnasium seeds it, so a seed plays Gymnasium's episode
//! (tests/fixtures/make_box2d_fixture.py records them).

mod bipedal_walker;
mod lunar_lander;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Once};

use wrapped2d::b2;
use wrapped2d::dynamics::world::callbacks::ContactAccess;
use wrapped2d::user_data::NoUserData;

use super::numpy_rng::NumpyRng;
use super::time_limit::{Task, TimeLimited};
use super::Env;

/// The Box2D ids with their Gymnasium step limits.
pub const IDS: [(&str, u32); 4] = [
    ("LunarLander-v3", 1000),
    ("LunarLanderContinuous-v3", 1000),
    ("BipedalWalker-v3", 1600),
    ("BipedalWalkerHardcore-v3", 2000),
];

type World = b2::World<NoUserData>;

// Gymnasium's scale, pace and picture, the same in both tasks.
const FPS: f64 = 50.0;
/// Pixels per metre of the 600x400 viewport.
const SCALE: f64 = 30.0;
const VIEWPORT_W: f64 = 600.0;
const VIEWPORT_H: f64 = 400.0;

/// One step of the world as both tasks take it: 1/FPS seconds, with Gymnasium's
/// velocity and position iterations.
fn step_world(world: &mut World) {
    world.step((1.0 / FPS) as f32, 6 * 30, 2 * 30);
}

/// A Box2D world that moves between threads with the environment owning it.
///
/// wrapped2d's world holds raw pointers to its C++ b2World, so it is not `Send`. The
/// world is owned by one environment and reached only through `&mut self`; its
/// contact listener (wrapped2d keeps it as `Box<dyn Any>`, unchecked) must be `Send`
/// too, as `ContactWatch` is. Outside the worlds Box2D 2.3.1 writes two kinds of
/// global: the table of contact constructors, filled lazily by the first contact any
/// world makes (`warm_up` fills it before a second thread can), and statistics
/// counters of its distance and time-of-impact routines, written and never read,
/// whose races between worlds stepped at once change nothing any world computes.
struct OwnedWorld(World);

// SAFETY: see the type's comment: exclusive ownership, a `Send` listener, the lazy
// global table filled by `warm_up` before any environment exists.
unsafe impl Send for OwnedWorld {}

/// Makes one contact in a throwaway world, once per process, so that Box2D fills its
/// global table of contact constructors here rather than in two threads at once.
fn warm_up() {
    static WARM: Once = Once::new();
    WARM.call_once(|| {
        let mut world = World::new(&vec2(0.0, -10.0));
        let ground = world.create_body(&b2::BodyDef::new());
        let edge = b2::EdgeShape::new_with(&vec2(-1.0, 0.0), &vec2(1.0, 0.0));
        world.body_mut(ground).create_fixture(&edge, &mut b2::FixtureDef::new());
        let block = create_dynamic_body(&mut world, (0.0, 0.0), 0.0);
        let shape = b2::PolygonShape::new_box(0.5, 0.5);
        let mut fixture = b2::FixtureDef { density: 1.0, ..b2::FixtureDef::new() };
        world.body_mut(block).create_fixture(&shape, &mut fixture);
        world.step(0.02, 8, 3);
    });
}

/// Creates the Box2D task `id`, or `None` if `id` is not one.
pub fn make(id: &str, seed: u64) -> Option<Box<dyn Env>> {
    let &(id, max_episode_steps) = IDS.iter().find(|(known, _)| *known == id)?;
    warm_up();
    let task: Box<dyn Task<NumpyRng>> = match id {
        "LunarLander-v3" => Box::new(lunar_lander::LunarLander::new(false)),
        "LunarLanderContinuous-v3" => Box::new(lunar_lander::LunarLander::new(true)),
        "BipedalWalker-v3" => Box::new(bipedal_walker::BipedalWalker::new(false)),
        "BipedalWalkerHardcore-v3" => Box::new(bipedal_walker::BipedalWalker::new(true)),
        _ => unreachable!("IDS and this match list the same tasks"),
    };
    Some(TimeLimited::boxed(id, task, seed, NumpyRng::new, max_episode_steps))
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

/// A dynamic body as pybox2d's CreateDynamicBody makes one, its fixtures to follow.
fn create_dynamic_body(world: &mut World, (x, y): (f64, f64), angle: f64) -> b2::BodyHandle {
    let definition = b2::BodyDef {
        body_type: b2::BodyType::Dynamic,
        position: vec2(x, y),
        angle: angle as f32,
        ..b2::BodyDef::new()
    };
    world.create_body(&definition)
}

/// A fixture that collides with the ground (category 1) only, under `category`.
fn ground_only_fixture(category: u16, density: f32, friction: f32) -> b2::FixtureDef {
    b2::FixtureDef {
        density,
        friction,
        restitution: 0.0,
        filter: b2::Filter { category_bits: category, mask_bits: 0x001, group_index: 0 },
        ..b2::FixtureDef::new()
    }
}

/// A revolute joint's definition as pybox2d makes one given both bodies: the
/// reference angle is their angle difference at creation (Box2D's own default is 0),
/// so the joint's limits count from the bodies' tilt then.
fn revolute_joint(
    world: &World,
    body_a: b2::BodyHandle,
    body_b: b2::BodyHandle,
) -> b2::RevoluteJointDef {
    let reference_angle =
        f64::from(world.body(body_b).angle()) - f64::from(world.body(body_a).angle());
    b2::RevoluteJointDef {
        reference_angle: reference_angle as f32,
        ..b2::RevoluteJointDef::new(body_a, body_b)
    }
}

/// The corners of a box `2 half_width` by `2 half_height` centred on its body, as
/// Box2D's `new_box` makes it.
fn box_corners(half_width: f64, half_height: f64) -> [(f64, f64); 4] {
    [
        (-half_width, -half_height),
        (half_width, -half_height),
        (half_width, half_height),
        (-half_width, half_height),
    ]
}

/// Points given in `body`'s own frame (metres), where the picture shows them.
fn placed(
    body: &b2::Body,
    local: &[(f64, f64)],
    to_pixels: impl Fn((f64, f64)) -> (f64, f64),
) -> Vec<(f64, f64)> {
    let world_point = |&(x, y): &(f64, f64)| {
        let point = body.world_point(&vec2(x, y));
        to_pixels((f64::from(point.x), f64::from(point.y)))
    };
    local.iter().map(world_point).collect()
}

fn vec2(x: f64, y: f64) -> b2::Vec2 {
    b2::Vec2 { x: x as f32, y: y as f32 }
}
