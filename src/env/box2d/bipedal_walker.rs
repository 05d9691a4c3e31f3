//! Gymnasium's BipedalWalker-v3 and its Hardcore form: a hull on two legs of two
//! segments each, four motors (hips and knees) driven by torques in [-1, 1], ten lidar
//! rays ahead and below, over rolling grass or, in Hardcore, stumps, stairs and pits.
//! Reaching the far end scores about 300; a fall costs 100.
//!
//! Gymnasium keeps one Box2D world for the environment's life and, at each reset,
//! destroys the last episode's bodies before building the next; the order of those
//! calls shapes Box2D's broad phase and so the order contacts are solved in, so it is
//! kept here call for call.

use std::sync::Arc;

use wrapped2d::b2;

use super::{
    box_corners, create_dynamic_body, ground_only_fixture, placed, revolute_joint, step_world,
    vec2, ContactWatch, Contacts, OwnedWorld, World, FPS, SCALE, VIEWPORT_H, VIEWPORT_W,
};
use crate::env::draw::{
    Canvas, BACKGROUND, GRASS, GROUND, HULL, HULL_EDGE, LIDAR, OBSTACLE_EDGE, PENNANT, SKY,
    WALKER_LEFT_LEG, WALKER_RIGHT_LEG,
};
use crate::env::numpy_rng::NumpyRng;
use crate::env::time_limit::Task;
use crate::env::{Action, ActionSpace, Frame};

const MOTORS_TORQUE: f32 = 80.0;
const SPEED_HIP: f64 = 4.0;
const SPEED_KNEE: f64 = 6.0;
const LIDAR_RANGE: f64 = 160.0 / SCALE;
const INITIAL_RANDOM: f64 = 5.0;
const HULL_POLY: [(f64, f64); 5] =
    [(-30.0, 9.0), (6.0, 9.0), (34.0, 1.0), (34.0, -8.0), (-30.0, -8.0)];
const LEG_DOWN: f64 = -8.0 / SCALE;
const LEG_W: f64 = 8.0 / SCALE;
const LEG_H: f64 = 34.0 / SCALE;
const TERRAIN_STEP: f64 = 14.0 / SCALE;
/// Terrain points, each TERRAIN_STEP apart.
const TERRAIN_LENGTH: usize = 200;
const TERRAIN_HEIGHT: f64 = VIEWPORT_H / SCALE / 4.0;
/// Grass stretches between obstacles last TERRAIN_GRASS / 2 to TERRAIN_GRASS steps.
const TERRAIN_GRASS: i64 = 10;
const TERRAIN_STARTPAD: i64 = 20;
const FRICTION: f32 = 2.5;
/// Category of the walker's fixtures: they collide with the ground (category 1) only,
/// and the lidar sees through them.
const WALKER_CATEGORY: u16 = 0x0020;
#[allow(clippy::approx_constant)]
const GYMNASIUM_PI: f64 = 3.14;

#[derive(Clone, Copy, PartialEq)]
enum Ground {
    Grass,
    Stump,
    Stairs,
    Pit,
}

/// The terrain as generated, in metres, for the picture.
struct Terrain {
    points: Vec<(f64, f64)>,
    obstacles: Vec<[(f64, f64); 4]>,
    clouds: Vec<Vec<(f64, f64)>>,
}

struct Episode {
    /// The terrain's bodies in the order Gymnasium destroys them.
    terrain_bodies: Vec<b2::BodyHandle>,
    terrain: Terrain,
    hull: b2::BodyHandle,
    /// Upper and lower leg of the left leg, then of the right.
    legs: [b2::BodyHandle; 4],
    /// Hip and knee of the left leg, then of the right.
    joints: [b2::JointHandle; 4],
    contacts: Arc<Contacts>,
    previous_shaping: Option<f64>,
    /// Where each lidar ray ended, for the picture.
    lidar_ends: Vec<(f64, f64)>,
}

/// Gymnasium's walker, on rolling grass or (`hardcore`) among obstacles.
pub struct BipedalWalker {
    hardcore: bool,
    world: OwnedWorld,
    episode: Option<Episode>,
}

impl BipedalWalker {
    pub fn new(hardcore: bool) -> Self {
        BipedalWalker { hardcore, world: OwnedWorld(World::new(&vec2(0.0, -10.0))), episode: None }
    }

    /// Destroys the last episode's bodies in Gymnasium's order. Gymnasium removes its
    /// contact listener first; here the last episode's stays until the next is
    /// installed, and the contacts ending with these bodies mark only that episode's
    /// discarded record (wrapped2d keeps each body's handle readable through the call).
    fn destroy_episode(&mut self) {
        let Some(episode) = self.episode.take() else { return };
        let world = &mut self.world.0;
        for body in episode.terrain_bodies.into_iter().chain([episode.hull]).chain(episode.legs) {
            world.destroy_body(body);
        }
    }

    /// Gymnasium's terrain generator, draw for draw: the same seed gives the same ground.
    fn generate_terrain(&mut self, rng: &mut NumpyRng) -> (Terrain, Vec<b2::BodyHandle>) {
        let world = &mut self.world.0;
        let mut bodies = Vec::new();
        let mut obstacles = Vec::new();
        let mut add_obstacle = |world: &mut World, corners: [(f64, f64); 4]| {
            let shape = b2::PolygonShape::new_with(&corners.map(|(x, y)| vec2(x, y)));
            bodies.push(ground_body(world, &shape));
            obstacles.push(corners);
        };
        let mut state = Ground::Grass;
        let mut velocity = 0.0;
        let mut y = TERRAIN_HEIGHT;
        let mut counter = TERRAIN_STARTPAD;
        let mut oneshot = false;
        let (mut stair_steps, mut stair_width, mut stair_height) = (0i64, 0i64, 0i64);
        let mut original_y = 0.0;
        let mut points = Vec::with_capacity(TERRAIN_LENGTH);
        for i in 0..TERRAIN_LENGTH {
            let x = i as f64 * TERRAIN_STEP;
            match (state, oneshot) {
                (Ground::Grass, false) => {
                    velocity = 0.8 * velocity + 0.01 * sign(TERRAIN_HEIGHT - y);
                    if i as i64 > TERRAIN_STARTPAD {
                        velocity += rng.uniform(-1.0, 1.0) / SCALE;
                    }
                    y += velocity;
                }
                (Ground::Pit, true) => {
                    counter = rng.integers(3, 5);
                    let pit = [
                        (x, y),
                        (x + TERRAIN_STEP, y),
                        (x + TERRAIN_STEP, y - 4.0 * TERRAIN_STEP),
                        (x, y - 4.0 * TERRAIN_STEP),
                    ];
                    add_obstacle(world, pit);
                    add_obstacle(
                        world,
                        pit.map(|(px, py)| (px + TERRAIN_STEP * counter as f64, py)),
                    );
                    counter += 2;
                    original_y = y;
                }
                (Ground::Pit, false) => {
                    y = original_y;
                    if counter > 1 {
                        y -= 4.0 * TERRAIN_STEP;
                    }
                }
                (Ground::Stump, true) => {
                    counter = rng.integers(1, 3);
                    let size = counter as f64 * TERRAIN_STEP;
                    add_obstacle(
                        world,
                        [(x, y), (x + size, y), (x + size, y + size), (x, y + size)],
                    );
                }
                (Ground::Stairs, true) => {
                    stair_height = if rng.next_f64() > 0.5 { 1 } else { -1 };
                    stair_width = rng.integers(4, 5);
                    stair_steps = rng.integers(3, 5);
                    original_y = y;
                    for s in 0..stair_steps {
                        let left = x + (s * stair_width) as f64 * TERRAIN_STEP;
                        let right = x + ((1 + s) * stair_width) as f64 * TERRAIN_STEP;
                        let top = y + (s * stair_height) as f64 * TERRAIN_STEP;
                        let bottom = y + (-1 + s * stair_height) as f64 * TERRAIN_STEP;
                        add_obstacle(
                            world,
                            [(left, top), (right, top), (right, bottom), (left, bottom)],
                        );
                    }
                    counter = stair_steps * stair_width;
                }
                (Ground::Stairs, false) => {
                    let s = stair_steps * stair_width - counter - stair_height;
                    let n = s as f64 / stair_width as f64;
                    y = original_y + (n * stair_height as f64) * TERRAIN_STEP;
                }
                (Ground::Grass, true) | (Ground::Stump, false) => {}
            }
            oneshot = false;
            points.push((x, y));
            counter -= 1;
            if counter == 0 {
                counter = rng.integers(TERRAIN_GRASS / 2, TERRAIN_GRASS);
                state = if state == Ground::Grass && self.hardcore {
                    [Ground::Stump, Ground::Stairs, Ground::Pit][rng.integers(1, 4) as usize - 1]
                } else {
                    Ground::Grass
                };
                oneshot = true;
            }
        }
        for pair in points.windows(2) {
            let shape =
                b2::EdgeShape::new_with(&vec2(pair[0].0, pair[0].1), &vec2(pair[1].0, pair[1].1));
            bodies.push(ground_body(world, &shape));
        }
        bodies.reverse();
        let clouds = (0..TERRAIN_LENGTH / 20)
            .map(|_| {
                let x = rng.uniform(0.0, TERRAIN_LENGTH as f64) * TERRAIN_STEP;
                let y = VIEWPORT_H / SCALE * 3.0 / 4.0;
                (0..5)
                    .map(|a| {
                        // Gymnasium writes 3.14, not π; the clouds' corners follow it.
                        let turn = GYMNASIUM_PI * 2.0 * a as f64 / 5.0;
                        let px = x
                            + 15.0 * TERRAIN_STEP * turn.sin()
                            + rng.uniform(0.0, 5.0 * TERRAIN_STEP);
                        let py = y
                            + 5.0 * TERRAIN_STEP * turn.cos()
                            + rng.uniform(0.0, 5.0 * TERRAIN_STEP);
                        (px, py)
                    })
                    .collect()
            })
            .collect();
        (Terrain { points, obstacles, clouds }, bodies)
    }

    fn build(&mut self, rng: &mut NumpyRng) -> Episode {
        let (terrain, terrain_bodies) = self.generate_terrain(rng);
        let world = &mut self.world.0;
        let init_x = TERRAIN_STEP * TERRAIN_STARTPAD as f64 / 2.0;
        let init_y = TERRAIN_HEIGHT + 2.0 * LEG_H;
        let walker_fixture =
            |density: f32, friction: f32| ground_only_fixture(WALKER_CATEGORY, density, friction);
        let hull = create_dynamic_body(world, (init_x, init_y), 0.0);
        {
            let points: Vec<b2::Vec2> =
                HULL_POLY.iter().map(|&(x, y)| vec2(x / SCALE, y / SCALE)).collect();
            let mut body = world.body_mut(hull);
            body.create_fixture(
                &b2::PolygonShape::new_with(&points),
                &mut walker_fixture(5.0, 0.1),
            );
            let push = vec2(rng.uniform(-INITIAL_RANDOM, INITIAL_RANDOM), 0.0);
            body.apply_force_to_center(&push, true);
        }
        let mut legs = Vec::with_capacity(4);
        let mut joints = Vec::with_capacity(4);
        for side in [-1.0, 1.0] {
            let upper =
                create_dynamic_body(world, (init_x, init_y - LEG_H / 2.0 - LEG_DOWN), side * 0.05);
            let shape = b2::PolygonShape::new_box((LEG_W / 2.0) as f32, (LEG_H / 2.0) as f32);
            world.body_mut(upper).create_fixture(&shape, &mut walker_fixture(1.0, 0.2));
            let hip = joint(
                world,
                (hull, upper),
                ((0.0, LEG_DOWN), (0.0, LEG_H / 2.0)),
                side,
                (-0.8, 1.1),
            );
            legs.push(upper);
            joints.push(hip);
            let lower = create_dynamic_body(
                world,
                (init_x, init_y - LEG_H * 3.0 / 2.0 - LEG_DOWN),
                side * 0.05,
            );
            let shape = b2::PolygonShape::new_box((0.8 * LEG_W / 2.0) as f32, (LEG_H / 2.0) as f32);
            world.body_mut(lower).create_fixture(&shape, &mut walker_fixture(1.0, 0.2));
            let knee = joint(
                world,
                (upper, lower),
                ((0.0, -LEG_H / 2.0), (0.0, LEG_H / 2.0)),
                1.0,
                (-1.6, -0.1),
            );
            legs.push(lower);
            joints.push(knee);
        }
        let legs: [b2::BodyHandle; 4] = legs.try_into().expect("four leg segments");
        let contacts = ContactWatch::install(world, hull, [legs[1], legs[3]]);
        Episode {
            terrain_bodies,
            terrain,
            hull,
            legs,
            joints: joints.try_into().expect("four joints"),
            contacts,
            previous_shaping: None,
            lidar_ends: Vec::new(),
        }
    }

    fn torques(action: &Action) -> [f32; 4] {
        match action {
            Action::Continuous(values) if values.len() == 4 => {
                [values[0], values[1], values[2], values[3]]
            }
            other => panic!("action {other:?} is not four continuous values"),
        }
    }
}

/// A static body of the ground with one fixture of `shape`, as Gymnasium makes each
/// piece of the walker's terrain.
fn ground_body(world: &mut World, shape: &dyn b2::Shape) -> b2::BodyHandle {
    let body = world.create_body(&b2::BodyDef::new());
    let mut fixture = b2::FixtureDef { friction: FRICTION, ..b2::FixtureDef::new() };
    world.body_mut(body).create_fixture(shape, &mut fixture);
    body
}

fn sign(value: f64) -> f64 {
    if value > 0.0 {
        1.0
    } else if value < 0.0 {
        -1.0
    } else {
        0.0
    }
}

/// A motored, limited revolute joint, defined as pybox2d defines it.
fn joint(
    world: &mut World,
    (body_a, body_b): (b2::BodyHandle, b2::BodyHandle),
    (anchor_a, anchor_b): ((f64, f64), (f64, f64)),
    motor_speed: f64,
    (lower, upper): (f64, f64),
) -> b2::JointHandle {
    let definition = b2::RevoluteJointDef {
        local_anchor_a: vec2(anchor_a.0, anchor_a.1),
        local_anchor_b: vec2(anchor_b.0, anchor_b.1),
        enable_motor: true,
        enable_limit: true,
        max_motor_torque: MOTORS_TORQUE,
        motor_speed: motor_speed as f32,
        lower_angle: lower as f32,
        upper_angle: upper as f32,
        ..revolute_joint(world, body_a, body_b)
    };
    world.create_joint(&definition)
}

fn with_revolute_mut(
    world: &mut World,
    joint: b2::JointHandle,
    change: impl FnOnce(&mut b2::RevoluteJoint),
) {
    match &mut **world.joint_mut(joint) {
        b2::UnknownJoint::Revolute(revolute) => change(revolute),
        _ => unreachable!("the walker's joints are revolute"),
    }
}

fn with_revolute<R>(
    world: &World,
    joint: b2::JointHandle,
    read: impl FnOnce(&b2::RevoluteJoint) -> R,
) -> R {
    match &**world.joint(joint) {
        b2::UnknownJoint::Revolute(revolute) => read(revolute),
        _ => unreachable!("the walker's joints are revolute"),
    }
}

impl Task<NumpyRng> for BipedalWalker {
    fn action_space(&self) -> ActionSpace {
        ActionSpace::Continuous { low: vec![-1.0; 4], high: vec![1.0; 4] }
    }

    fn observation_len(&self) -> usize {
        24
    }

    fn reset(&mut self, rng: &mut NumpyRng) -> Vec<f32> {
        self.destroy_episode();
        self.episode = Some(self.build(rng));
        // Gymnasium's reset returns the observation after one step with the motors idle.
        self.step(&Action::Continuous(vec![0.0; 4]), rng).0
    }

    fn step(&mut self, action: &Action, _rng: &mut NumpyRng) -> (Vec<f32>, f32, bool) {
        let torques = Self::torques(action);
        let episode = self.episode.as_mut().expect("reset builds the world before any step");
        let world = &mut self.world.0;
        let speeds = [SPEED_HIP, SPEED_KNEE, SPEED_HIP, SPEED_KNEE];
        for ((&joint, &torque), speed) in episode.joints.iter().zip(&torques).zip(speeds) {
            // Gymnasium computes these in the action's float32, as NumPy does.
            with_revolute_mut(world, joint, |revolute| {
                revolute.set_motor_speed(speed as f32 * sign(f64::from(torque)) as f32);
                revolute.set_max_motor_torque(MOTORS_TORQUE * torque.abs().clamp(0.0, 1.0));
            });
        }
        step_world(world);

        let hull = world.body(episode.hull);
        let position = *hull.position();
        let velocity = *hull.linear_velocity();
        let (px, py) = (f64::from(position.x), f64::from(position.y));
        let [leg_a, lower_a, leg_b, lower_b] = episode.legs;
        // The lidar sees the ground's fixtures only (Gymnasium skips those outside
        // category 1, which are the walker's own).
        let walker = [episode.hull, leg_a, lower_a, leg_b, lower_b];
        let mut lidar = Vec::with_capacity(10);
        episode.lidar_ends.clear();
        for ray in 0..10 {
            let bearing = 1.5 * ray as f64 / 10.0;
            let end = vec2(px + bearing.sin() * LIDAR_RANGE, py - bearing.cos() * LIDAR_RANGE);
            let mut nearest = 1.0f32;
            let mut hit = end;
            let mut report = |body: b2::BodyHandle,
                              _: b2::FixtureHandle,
                              point: &b2::Vec2,
                              _: &b2::Vec2,
                              fraction: f32| {
                if walker.contains(&body) {
                    return -1.0;
                }
                nearest = fraction;
                hit = *point;
                fraction
            };
            world.ray_cast(&mut report, &position, &end);
            lidar.push(f64::from(nearest));
            episode.lidar_ends.push((f64::from(hit.x), f64::from(hit.y)));
        }
        let joint_state = |index: usize| {
            with_revolute(world, episode.joints[index], |j| {
                (f64::from(j.joint_angle()), f64::from(j.joint_speed()))
            })
        };
        let (hip_a, knee_a, hip_b, knee_b) =
            (joint_state(0), joint_state(1), joint_state(2), joint_state(3));
        let angle = f64::from(hull.angle());
        let mut state = vec![
            angle,
            2.0 * f64::from(hull.angular_velocity()) / FPS,
            0.3 * f64::from(velocity.x) * (VIEWPORT_W / SCALE) / FPS,
            0.3 * f64::from(velocity.y) * (VIEWPORT_H / SCALE) / FPS,
            hip_a.0,
            hip_a.1 / SPEED_HIP,
            knee_a.0 + 1.0,
            knee_a.1 / SPEED_KNEE,
            episode.contacts.foot_on_ground(0),
            hip_b.0,
            hip_b.1 / SPEED_HIP,
            knee_b.0 + 1.0,
            knee_b.1 / SPEED_KNEE,
            episode.contacts.foot_on_ground(1),
        ];
        state.extend(lidar);

        let shaping = 130.0 * px / SCALE - 5.0 * angle.abs();
        let progress = episode.previous_shaping.map_or(0.0, |previous| shaping - previous);
        episode.previous_shaping = Some(shaping);
        // NumPy 2 takes the motor cost in the action's float32, and with it the reward.
        let motor_cost_rate = (0.00035 * f64::from(MOTORS_TORQUE)) as f32;
        let mut reward = torques.iter().fold(progress as f32, |reward, torque| {
            reward - motor_cost_rate * torque.abs().clamp(0.0, 1.0)
        });
        let mut terminated = false;
        if episode.contacts.body_touched() || px < 0.0 {
            reward = -100.0;
            terminated = true;
        }
        if px > (TERRAIN_LENGTH as f64 - TERRAIN_GRASS as f64) * TERRAIN_STEP {
            terminated = true;
        }
        (state.iter().map(|&value| value as f32).collect(), reward, terminated)
    }

    fn draw(&self) -> Frame {
        let mut canvas = Canvas::new(VIEWPORT_W as usize, VIEWPORT_H as usize);
        let Some(episode) = &self.episode else { return canvas.into_frame() };
        let world = &self.world.0;
        let hull = world.body(episode.hull);
        let scroll = f64::from(hull.position().x) - VIEWPORT_W / SCALE / 5.0;
        let to_pixels = |(x, y): (f64, f64)| ((x - scroll) * SCALE, VIEWPORT_H - y * SCALE);
        canvas.rect((0.0, 0.0), (VIEWPORT_W, VIEWPORT_H), SKY);
        // Clouds drift at half the ground's pace, as in Gymnasium's picture.
        for cloud in &episode.terrain.clouds {
            let points: Vec<(f64, f64)> =
                cloud.iter().map(|&(x, y)| to_pixels((x + scroll / 2.0, y))).collect();
            canvas.polygon(&points, BACKGROUND);
        }
        for pair in episode.terrain.points.windows(2) {
            let strip = [pair[0], pair[1], (pair[1].0, 0.0), (pair[0].0, 0.0)].map(to_pixels);
            canvas.polygon(&strip, GROUND);
            canvas.line(to_pixels(pair[0]), to_pixels(pair[1]), 2.0, GRASS);
        }
        for obstacle in &episode.terrain.obstacles {
            let corners = obstacle.map(to_pixels);
            canvas.polygon(&corners, BACKGROUND);
            canvas.outline(&corners, OBSTACLE_EDGE);
        }
        let flag_x = TERRAIN_STEP * 3.0;
        let (x, foot) = to_pixels((flag_x, TERRAIN_HEIGHT));
        canvas.line((x, foot), (x, foot - 50.0), 1.0, BACKGROUND);
        canvas.polygon(&[(x, foot - 50.0), (x, foot - 40.0), (x + 25.0, foot - 45.0)], PENNANT);
        let origin = to_pixels((f64::from(hull.position().x), f64::from(hull.position().y)));
        for &end in &episode.lidar_ends {
            canvas.line(origin, to_pixels(end), 1.0, LIDAR);
        }
        let colors = [WALKER_LEFT_LEG, WALKER_LEFT_LEG, WALKER_RIGHT_LEG, WALKER_RIGHT_LEG];
        for (index, (&segment, color)) in episode.legs.iter().zip(colors).enumerate() {
            let body = world.body(segment);
            let width = if index % 2 == 0 { LEG_W } else { 0.8 * LEG_W } / 2.0;
            let corners = placed(&body, &box_corners(width, LEG_H / 2.0), to_pixels);
            canvas.polygon(&corners, color);
            canvas.outline(&corners, HULL_EDGE);
        }
        let in_metres = HULL_POLY.map(|(x, y)| (x / SCALE, y / SCALE));
        let shape = placed(&hull, &in_metres, to_pixels);
        canvas.polygon(&shape, HULL);
        canvas.outline(&shape, HULL_EDGE);
        canvas.into_frame()
    }

    fn step_seconds(&self) -> f64 {
        1.0 / FPS
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::box2d;

    /// The picture follows the walker and shows sky, ground, its hull and both legs,
    /// the lidar's rays and, at the start, the pennant; Hardcore's obstacles when they
    /// come into view.
    #[test]
    fn drawing_shows_walker_lidar_and_ground() {
        let count = |frame: &Frame, color: u8| frame.pixels.iter().filter(|&&p| p == color).count();
        let mut env = box2d::make("BipedalWalkerHardcore-v3", 4).expect("id");
        env.reset(None).unwrap();
        let frame = env.render().unwrap();
        assert_eq!((frame.width, frame.height), (600, 400));
        assert!(count(&frame, HULL) > 500, "the hull is about 64 x 17 pixels");
        // The legs start side by side, the right one drawn over the left.
        assert!(count(&frame, WALKER_LEFT_LEG) + count(&frame, WALKER_RIGHT_LEG) > 300);
        assert!(count(&frame, LIDAR) > 100, "ten rays");
        assert!(count(&frame, PENNANT) > 100);
        assert!(count(&frame, GROUND) > 30_000 && count(&frame, SKY) > 100_000);
        // Carried along the course (the picture scrolls with the hull), it meets the
        // stumps, stairs and pits Hardcore's seed 4 raises.
        let mut obstacle_pixels = 0;
        for x in [20.0, 40.0, 60.0] {
            let mut scene = BipedalWalker::new(true);
            scene.reset(&mut NumpyRng::new(4));
            let hull = scene.episode.as_ref().unwrap().hull;
            scene.world.0.body_mut(hull).set_transform(&vec2(x, 8.0), 0.0);
            obstacle_pixels += count(&scene.draw(), OBSTACLE_EDGE);
        }
        assert!(obstacle_pixels > 100, "obstacles drawn: {obstacle_pixels}");
    }

    /// Gymnasium's terrains for the fixture's seeds (tests/fixtures/make_box2d_fixture.py):
    /// the same ground heights and obstacle corners, Hardcore's stumps, stairs and pits
    /// included, to the float.
    #[test]
    fn terrain_matches_gymnasium() {
        let fixture: serde_json::Value =
            serde_json::from_str(include_str!("../../../tests/fixtures/box2d_episodes.json"))
                .expect("fixture parses");
        let played = fixture["episodes"].as_array().expect("episodes").iter();
        let walkers = played.filter(|episode| episode.get("terrain").is_some());
        let records: Vec<(String, u64, &serde_json::Value)> = walkers
            .map(|episode| {
                (episode["id"].to_string(), episode["seed"].as_u64().unwrap(), &episode["terrain"])
            })
            .chain(
                fixture["terrains"].as_array().expect("terrains").iter().map(|record| {
                    (record["id"].to_string(), record["seed"].as_u64().unwrap(), record)
                }),
            )
            .collect();
        assert_eq!(records.len(), 11);
        let mut obstacles_seen = 0;
        for (id, seed, expected) in records {
            let mut walker = BipedalWalker::new(id.contains("Hardcore"));
            let mut rng = NumpyRng::new(seed);
            walker.reset(&mut rng);
            let terrain = &walker.episode.as_ref().expect("built").terrain;
            let heights: Vec<f64> = terrain.points.iter().map(|&(_, y)| y).collect();
            let expected_heights: Vec<f64> = expected["heights"]
                .as_array()
                .unwrap()
                .iter()
                .map(|y| y.as_f64().unwrap())
                .collect();
            assert_eq!(heights, expected_heights, "{id} seed {seed}");
            // Gymnasium's corners come back from Box2D, as f32, in Box2D's order.
            let mut corners: Vec<[f32; 2]> = terrain
                .obstacles
                .iter()
                .flat_map(|obstacle| obstacle.map(|(x, y)| [x as f32, y as f32]))
                .collect();
            let mut expected_corners: Vec<[f32; 2]> = expected["obstacles"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|obstacle| obstacle.as_array().unwrap().iter())
                .map(|corner| [0, 1].map(|axis| corner[axis].as_f64().unwrap() as f32))
                .collect();
            corners.sort_by(|a, b| a.partial_cmp(b).unwrap());
            expected_corners.sort_by(|a, b| a.partial_cmp(b).unwrap());
            assert_eq!(corners, expected_corners, "{id} seed {seed}");
            obstacles_seen += terrain.obstacles.len();
        }
        assert!(obstacles_seen > 30, "Hardcore's seeds raise obstacles: {obstacles_seen}");
    }
}
