//! Gymnasium's LunarLander-v3: a lander with two spring legs, a main engine and two
//! side engines, pushed at random from the top of the screen, to be set down between
//! the flags. Four discrete actions (nothing, left engine, main engine, right engine),
//! or with `continuous` two values: main throttle and side direction.

use std::sync::Arc;

use wrapped2d::b2;

use super::{
    box_corners, create_dynamic_body, ground_only_fixture, placed, revolute_joint, step_world,
    vec2, ContactWatch, Contacts, OwnedWorld, World, FPS, SCALE, VIEWPORT_H, VIEWPORT_W,
};
use crate::env::draw::{Canvas, BACKGROUND, FLAG, FLAME, INK, LANDER, LANDER_EDGE};
use crate::env::numpy_rng::NumpyRng;
use crate::env::time_limit::Task;
use crate::env::{Action, ActionSpace, Frame};

const MAIN_ENGINE_POWER: f64 = 13.0;
const SIDE_ENGINE_POWER: f64 = 0.6;
const INITIAL_RANDOM: f64 = 1000.0;
const LANDER_POLY: [(f64, f64); 6] =
    [(-14.0, 17.0), (-17.0, 0.0), (-17.0, -10.0), (17.0, -10.0), (17.0, 0.0), (14.0, 17.0)];
const LEG_AWAY: f64 = 20.0;
const LEG_DOWN: f64 = 18.0;
const LEG_W: f64 = 2.0;
const LEG_H: f64 = 8.0;
const LEG_SPRING_TORQUE: f64 = 40.0;
const SIDE_ENGINE_HEIGHT: f64 = 14.0;
const SIDE_ENGINE_AWAY: f64 = 12.0;
const MAIN_ENGINE_Y_LOCATION: f64 = 4.0;
const CHUNKS: usize = 11;
const GRAVITY: f64 = -10.0;

/// One episode's world and what Gymnasium's Python keeps beside it.
struct Episode {
    world: OwnedWorld,
    lander: b2::BodyHandle,
    legs: [b2::BodyHandle; 2],
    contacts: Arc<Contacts>,
    /// The terrain's vertices, left to right, in metres.
    terrain: Vec<(f64, f64)>,
    helipad_x: (f64, f64),
    helipad_y: f64,
    previous_shaping: Option<f64>,
    /// The engines' powers in the last step, for drawing flames.
    last_powers: Powers,
}

/// How hard each engine fires in a step.
#[derive(Clone, Copy, Default)]
struct Powers {
    main: f64,
    side: f64,
    /// -1 or +1 while a side engine fires (see `LunarLander::powers`), else 0.
    direction: f64,
}

/// Gymnasium's lander, with discrete or (`continuous`) two-valued actions.
pub struct LunarLander {
    continuous: bool,
    episode: Option<Episode>,
}

impl LunarLander {
    pub fn new(continuous: bool) -> Self {
        LunarLander { continuous, episode: None }
    }

    fn build(&self, rng: &mut NumpyRng) -> Episode {
        let mut world = World::new(&vec2(0.0, GRAVITY));
        let width = VIEWPORT_W / SCALE;
        let height = VIEWPORT_H / SCALE;
        let mut heights: Vec<f64> = (0..=CHUNKS).map(|_| rng.uniform(0.0, height / 2.0)).collect();
        let chunk_x: Vec<f64> =
            (0..CHUNKS).map(|i| width / (CHUNKS - 1) as f64 * i as f64).collect();
        let helipad_x = (chunk_x[CHUNKS / 2 - 1], chunk_x[CHUNKS / 2 + 1]);
        let helipad_y = height / 4.0;
        heights[CHUNKS / 2 - 2..=CHUNKS / 2 + 2].fill(helipad_y);
        // Gymnasium smooths with Python's indexing, where the first chunk's left
        // neighbour (index -1) is the last height drawn.
        let smooth_y: Vec<f64> = (0..CHUNKS)
            .map(|i| {
                let left = heights[(i + heights.len() - 1) % heights.len()];
                0.33 * (left + heights[i] + heights[i + 1])
            })
            .collect();

        let moon = world.create_body(&b2::BodyDef::new());
        {
            let mut moon = world.body_mut(moon);
            let floor = b2::EdgeShape::new_with(&vec2(0.0, 0.0), &vec2(width, 0.0));
            moon.create_fixture(&floor, &mut b2::FixtureDef::new());
            for i in 0..CHUNKS - 1 {
                let edge = b2::EdgeShape::new_with(
                    &vec2(chunk_x[i], smooth_y[i]),
                    &vec2(chunk_x[i + 1], smooth_y[i + 1]),
                );
                let mut fixture = b2::FixtureDef { friction: 0.1, ..b2::FixtureDef::new() };
                moon.create_fixture(&edge, &mut fixture);
            }
        }

        let initial = (VIEWPORT_W / SCALE / 2.0, VIEWPORT_H / SCALE);
        let lander = create_dynamic_body(&mut world, initial, 0.0);
        {
            let points: Vec<b2::Vec2> =
                LANDER_POLY.iter().map(|&(x, y)| vec2(x / SCALE, y / SCALE)).collect();
            let shape = b2::PolygonShape::new_with(&points);
            let mut body = world.body_mut(lander);
            body.create_fixture(&shape, &mut ground_only_fixture(0x0010, 5.0, 0.1));
            let push = vec2(
                rng.uniform(-INITIAL_RANDOM, INITIAL_RANDOM),
                rng.uniform(-INITIAL_RANDOM, INITIAL_RANDOM),
            );
            body.apply_force_to_center(&push, true);
        }

        let legs = [-1.0, 1.0].map(|side: f64| {
            let position = (initial.0 - side * LEG_AWAY / SCALE, initial.1);
            let leg = create_dynamic_body(&mut world, position, side * 0.05);
            let shape = b2::PolygonShape::new_box((LEG_W / SCALE) as f32, (LEG_H / SCALE) as f32);
            // Gymnasium leaves the legs' friction at Box2D's default, 0.2.
            world.body_mut(leg).create_fixture(&shape, &mut ground_only_fixture(0x0020, 1.0, 0.2));
            let (lower, upper) = if side < 0.0 { (0.9 - 0.5, 0.9) } else { (-0.9, -0.9 + 0.5) };
            let joint = b2::RevoluteJointDef {
                local_anchor_a: vec2(0.0, 0.0),
                local_anchor_b: vec2(side * LEG_AWAY / SCALE, LEG_DOWN / SCALE),
                enable_motor: true,
                enable_limit: true,
                max_motor_torque: LEG_SPRING_TORQUE as f32,
                motor_speed: (0.3 * side) as f32,
                lower_angle: lower as f32,
                upper_angle: upper as f32,
                ..revolute_joint(&world, lander, leg)
            };
            world.create_joint(&joint);
            leg
        });

        let contacts = ContactWatch::install(&mut world, lander, legs);
        let terrain = chunk_x.iter().copied().zip(smooth_y.iter().copied()).collect();
        Episode {
            world: OwnedWorld(world),
            lander,
            legs,
            contacts,
            terrain,
            helipad_x,
            helipad_y,
            previous_shaping: None,
            last_powers: Powers::default(),
        }
    }

    /// The engines' powers for an action: main (0 or 0.5..1), and side (0 or 0.5..1)
    /// with its direction: -1 (action 1, "left engine") pushes the lander left from
    /// above its centre, turning it counter-clockwise; +1 the mirror image.
    fn powers(&self, action: &Action) -> Powers {
        match (self.continuous, action) {
            (true, Action::Continuous(values)) if values.len() == 2 => {
                let main = values[0].clamp(-1.0, 1.0) as f64;
                let lateral = values[1].clamp(-1.0, 1.0) as f64;
                let main = if main > 0.0 { (main.clamp(0.0, 1.0) + 1.0) * 0.5 } else { 0.0 };
                let (side, direction) = if lateral.abs() > 0.5 {
                    (lateral.abs().clamp(0.5, 1.0), lateral.signum())
                } else {
                    (0.0, 0.0)
                };
                Powers { main, side, direction }
            }
            (false, &Action::Discrete(index)) if index < 4 => match index {
                2 => Powers { main: 1.0, ..Powers::default() },
                1 | 3 => Powers { side: 1.0, direction: index as f64 - 2.0, ..Powers::default() },
                _ => Powers::default(),
            },
            (true, other) => panic!("action {other:?} is not two continuous values"),
            (false, other) => panic!("action {other:?} is not one of 4 discrete actions"),
        }
    }
}

impl Task<NumpyRng> for LunarLander {
    fn action_space(&self) -> ActionSpace {
        if self.continuous {
            ActionSpace::Continuous { low: vec![-1.0; 2], high: vec![1.0; 2] }
        } else {
            ActionSpace::Discrete { n: 4 }
        }
    }

    fn observation_len(&self) -> usize {
        8
    }

    fn reset(&mut self, rng: &mut NumpyRng) -> Vec<f32> {
        self.episode = Some(self.build(rng));
        // Gymnasium's reset returns the observation after one step of doing nothing.
        let idle =
            if self.continuous { Action::Continuous(vec![0.0, 0.0]) } else { Action::Discrete(0) };
        self.step(&idle, rng).0
    }

    fn step(&mut self, action: &Action, rng: &mut NumpyRng) -> (Vec<f32>, f32, bool) {
        let powers = self.powers(action);
        let Powers { main: main_power, side: side_power, direction } = powers;
        let episode = self.episode.as_mut().expect("reset builds the world before any step");
        let world = &mut episode.world.0;
        {
            let mut lander = world.body_mut(episode.lander);
            let angle = f64::from(lander.angle());
            let tip = (angle.sin(), angle.cos());
            let side = (-tip.1, tip.0);
            let dispersion = [rng.uniform(-1.0, 1.0) / SCALE, rng.uniform(-1.0, 1.0) / SCALE];
            let position = *lander.position();
            let (px, py) = (f64::from(position.x), f64::from(position.y));
            if main_power > 0.0 {
                let reach = MAIN_ENGINE_Y_LOCATION / SCALE + 2.0 * dispersion[0];
                let ox = tip.0 * reach + side.0 * dispersion[1];
                let oy = -tip.1 * reach - side.1 * dispersion[1];
                let impulse = vec2(
                    -ox * MAIN_ENGINE_POWER * main_power,
                    -oy * MAIN_ENGINE_POWER * main_power,
                );
                lander.apply_linear_impulse(&impulse, &vec2(px + ox, py + oy), true);
            }
            if side_power > 0.0 {
                let away = 3.0 * dispersion[1] + direction * SIDE_ENGINE_AWAY / SCALE;
                let ox = tip.0 * dispersion[0] + side.0 * away;
                let oy = -tip.1 * dispersion[0] - side.1 * away;
                let at = vec2(
                    px + ox - tip.0 * 17.0 / SCALE,
                    py + oy + tip.1 * SIDE_ENGINE_HEIGHT / SCALE,
                );
                let impulse = vec2(
                    -ox * SIDE_ENGINE_POWER * side_power,
                    -oy * SIDE_ENGINE_POWER * side_power,
                );
                lander.apply_linear_impulse(&impulse, &at, true);
            }
        }
        step_world(world);
        episode.last_powers = powers;

        let lander = world.body(episode.lander);
        let position = lander.position();
        let velocity = lander.linear_velocity();
        let state = [
            (f64::from(position.x) - VIEWPORT_W / SCALE / 2.0) / (VIEWPORT_W / SCALE / 2.0),
            (f64::from(position.y) - (episode.helipad_y + LEG_DOWN / SCALE))
                / (VIEWPORT_H / SCALE / 2.0),
            f64::from(velocity.x) * (VIEWPORT_W / SCALE / 2.0) / FPS,
            f64::from(velocity.y) * (VIEWPORT_H / SCALE / 2.0) / FPS,
            f64::from(lander.angle()),
            20.0 * f64::from(lander.angular_velocity()) / FPS,
            episode.contacts.foot_on_ground(0),
            episode.contacts.foot_on_ground(1),
        ];
        let shaping = -100.0 * (state[0] * state[0] + state[1] * state[1]).sqrt()
            - 100.0 * (state[2] * state[2] + state[3] * state[3]).sqrt()
            - 100.0 * state[4].abs()
            + 10.0 * state[6]
            + 10.0 * state[7];
        let mut reward = episode.previous_shaping.map_or(0.0, |previous| shaping - previous);
        episode.previous_shaping = Some(shaping);
        reward -= main_power * 0.30;
        reward -= side_power * 0.03;
        let mut terminated = false;
        if episode.contacts.body_touched() || state[0].abs() >= 1.0 {
            terminated = true;
            reward = -100.0;
        }
        // At rest: Box2D put the lander to sleep, a landing.
        if !lander.is_awake() {
            terminated = true;
            reward = 100.0;
        }
        (state.iter().map(|&value| value as f32).collect(), reward as f32, terminated)
    }

    fn draw(&self) -> Frame {
        let mut canvas = Canvas::new(VIEWPORT_W as usize, VIEWPORT_H as usize);
        let Some(episode) = &self.episode else { return canvas.into_frame() };
        let to_pixels = |(x, y): (f64, f64)| (x * SCALE, VIEWPORT_H - y * SCALE);
        // The sky is black above the terrain; the ground below stays the background.
        canvas.rect((0.0, 0.0), (VIEWPORT_W, VIEWPORT_H), INK);
        let mut ground: Vec<(f64, f64)> =
            episode.terrain.iter().map(|&point| to_pixels(point)).collect();
        ground.push((VIEWPORT_W, VIEWPORT_H));
        ground.push((0.0, VIEWPORT_H));
        canvas.polygon(&ground, BACKGROUND);

        let world = &episode.world.0;
        let lander = world.body(episode.lander);
        // Gymnasium gives the lander's shapes in pixels of its own frame.
        let in_metres = |points: &[(f64, f64)]| -> Vec<(f64, f64)> {
            points.iter().map(|&(x, y)| (x / SCALE, y / SCALE)).collect()
        };
        let Powers { main: main_power, side: side_power, direction } = episode.last_powers;
        if main_power > 0.0 {
            let length = 10.0 + 20.0 * main_power;
            let flame = [(-5.0, -10.0), (5.0, -10.0), (0.0, -10.0 - length)];
            canvas.polygon(&placed(&lander, &in_metres(&flame), to_pixels), FLAME);
        }
        if side_power > 0.0 {
            // The engine on the side opposite the push fires outwards.
            let outward = -direction;
            let root = (outward * 17.0, SIDE_ENGINE_HEIGHT - 10.0);
            let tip_x = root.0 + outward * (6.0 + 10.0 * side_power);
            let flame = [(root.0, root.1 + 3.0), (root.0, root.1 - 3.0), (tip_x, root.1)];
            canvas.polygon(&placed(&lander, &in_metres(&flame), to_pixels), FLAME);
        }
        let hull = placed(&lander, &in_metres(&LANDER_POLY), to_pixels);
        canvas.polygon(&hull, LANDER);
        canvas.outline(&hull, LANDER_EDGE);
        for &leg in &episode.legs {
            let leg = world.body(leg);
            let corners = placed(&leg, &box_corners(LEG_W / SCALE, LEG_H / SCALE), to_pixels);
            canvas.polygon(&corners, LANDER);
            canvas.outline(&corners, LANDER_EDGE);
        }
        for x in [episode.helipad_x.0, episode.helipad_x.1] {
            let (x, pole_foot) = to_pixels((x, episode.helipad_y));
            let pole_top = pole_foot - 50.0;
            canvas.line((x, pole_foot), (x, pole_top), 1.0, BACKGROUND);
            canvas
                .polygon(&[(x, pole_top), (x, pole_top + 10.0), (x + 25.0, pole_top + 5.0)], FLAG);
        }
        canvas.into_frame()
    }

    fn step_seconds(&self) -> f64 {
        1.0 / FPS
    }
}

#[cfg(test)]
mod tests {
    use crate::env::draw::{FLAG, FLAME, LANDER};
    use crate::env::{box2d, Action};

    fn count(pixels: &[u8], color: u8) -> usize {
        pixels.iter().filter(|&&pixel| pixel == color).count()
    }

    /// The picture shows the lander, both flags and the ground; a flame only while an
    /// engine fires.
    #[test]
    fn drawing_shows_lander_flags_and_flames() {
        let mut env = box2d::make("LunarLander-v3", 3).expect("LunarLander-v3");
        env.reset(None).unwrap();
        // It starts at the top edge, half out of the picture; let it fall into view.
        for _ in 0..40 {
            env.step(&Action::Discrete(0)).unwrap();
        }
        let idle = env.render().unwrap();
        assert_eq!((idle.width, idle.height), (600, 400));
        assert!(count(&idle.pixels, LANDER) > 500, "the hull is about 34 x 27 pixels");
        let pennants = count(&idle.pixels, FLAG);
        assert!((230..=260).contains(&pennants), "two 25 x 10 pennants: {pennants} pixels");
        assert_eq!(count(&idle.pixels, FLAME), 0);
        env.step(&Action::Discrete(2)).unwrap();
        assert!(count(&env.render().unwrap().pixels, FLAME) > 50, "the main engine's flame");
        env.step(&Action::Discrete(3)).unwrap();
        assert!(count(&env.render().unwrap().pixels, FLAME) > 20, "a side engine's flame");
    }

    /// Worlds stepped on other threads give what the same worlds give on this one (the
    /// Box2D world is moved between threads with its environment).
    #[test]
    fn threads_play_as_this_thread_does() {
        let play = |seed: u64| -> Vec<Vec<f32>> {
            let mut env = box2d::make("LunarLanderContinuous-v3", seed).expect("id");
            let mut observations = vec![env.reset(None).unwrap()];
            for step in 0..300 {
                let phase = step as f32 * 0.1;
                let result = env.step(&Action::Continuous(vec![phase.sin(), phase.cos()])).unwrap();
                let done = result.done();
                observations.push(result.observation);
                if done {
                    observations.push(env.reset(None).unwrap());
                }
            }
            observations
        };
        let here: Vec<_> = (0..3).map(play).collect();
        let threads: Vec<_> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..3).map(|seed| scope.spawn(move || play(seed))).collect();
            handles.into_iter().map(|handle| handle.join().expect("thread")).collect()
        });
        assert_eq!(here, threads);
        assert_ne!(here[0], here[1], "seeds differ");
    }
}
