//! Classic-control tasks with Gym's exact dynamics, bounds, termination rules and
//! time limits (gym/gymnasium `classic_control`): CartPole-v0/v1, Acrobot-v1,
//! MountainCar-v0, MountainCarContinuous-v0 and Pendulum-v1.
//!
//! States are f64 as in Gym's NumPy code; observations are handed out as f32, as Gym's
//! observation spaces declare them. Initial states come from our own seeded generator,
//! so a seed gives the same episodes as itself, not the same as NumPy's.

use std::f64::consts::PI;

use super::draw::{Canvas, FLAG, INK, JOINT, POLE, ROD};
use super::rng::Rng;
use super::time_limit::{Task, TimeLimited};
use super::{Action, ActionSpace, Env, Frame};

/// The classic-control ids with their Gym step limits.
pub const IDS: [(&str, u32); 6] = [
    ("CartPole-v0", 200),
    ("CartPole-v1", 500),
    ("Acrobot-v1", 500),
    ("MountainCar-v0", 200),
    ("MountainCarContinuous-v0", 999),
    ("Pendulum-v1", 200),
];

/// The physics of one task: its state, how actions move it, and what the agent sees.
trait Dynamics: Send {
    fn action_space(&self) -> ActionSpace;
    fn observation_len(&self) -> usize;
    fn reset(&mut self, rng: &mut Rng);
    /// Applies one action; returns the reward and whether the episode terminated.
    fn step(&mut self, action: &Action) -> (f32, bool);
    fn observation(&self) -> Vec<f32>;
    /// A picture of the state, for recordings.
    fn draw(&self) -> Frame;
    /// Simulated time per step, in seconds.
    fn step_seconds(&self) -> f64;
}

/// Creates the classic-control task `id`, or `None` if `id` is not one.
pub fn make(id: &str, seed: u64) -> Option<Box<dyn Env>> {
    let &(id, max_episode_steps) = IDS.iter().find(|(known, _)| *known == id)?;
    let dynamics: Box<dyn Dynamics> = match id {
        "CartPole-v0" | "CartPole-v1" => Box::new(CartPole::default()),
        "Acrobot-v1" => Box::new(Acrobot::default()),
        "MountainCar-v0" => Box::new(MountainCar::default()),
        "MountainCarContinuous-v0" => Box::new(MountainCarContinuous::default()),
        "Pendulum-v1" => Box::new(Pendulum::default()),
        _ => unreachable!("IDS and this match list the same tasks"),
    };
    Some(TimeLimited::boxed(id, Box::new(Classic(dynamics)), seed, Rng::new, max_episode_steps))
}

/// A classic-control task as the time limit drives it: its dynamics draw from the
/// generator at reset only.
struct Classic(Box<dyn Dynamics>);

impl Task<Rng> for Classic {
    fn action_space(&self) -> ActionSpace {
        self.0.action_space()
    }

    fn observation_len(&self) -> usize {
        self.0.observation_len()
    }

    fn reset(&mut self, random: &mut Rng) -> Vec<f32> {
        self.0.reset(random);
        self.0.observation()
    }

    fn step(&mut self, action: &Action, _: &mut Rng) -> (Vec<f32>, f32, bool) {
        let (reward, terminated) = self.0.step(action);
        (self.0.observation(), reward, terminated)
    }

    fn draw(&self) -> Frame {
        self.0.draw()
    }

    fn step_seconds(&self) -> f64 {
        self.0.step_seconds()
    }
}

fn discrete(action: &Action, n: usize) -> usize {
    match *action {
        Action::Discrete(index) if index < n => index,
        ref other => panic!("action {other:?} is not one of {n} discrete actions"),
    }
}

fn continuous(action: &Action) -> f64 {
    match action {
        Action::Continuous(values) if values.len() == 1 => f64::from(values[0]),
        other => panic!("action {other:?} is not one continuous value"),
    }
}

/// Gym's CartPole: a pole on a cart pushed left or right with 10 N, Euler steps of 20 ms.
#[derive(Default)]
struct CartPole {
    /// x, x_dot, theta, theta_dot
    state: [f64; 4],
}

impl CartPole {
    const GRAVITY: f64 = 9.8;
    const MASS_CART: f64 = 1.0;
    const MASS_POLE: f64 = 0.1;
    const TOTAL_MASS: f64 = Self::MASS_CART + Self::MASS_POLE;
    /// Half the pole's length.
    const LENGTH: f64 = 0.5;
    const POLE_MASS_LENGTH: f64 = Self::MASS_POLE * Self::LENGTH;
    const FORCE: f64 = 10.0;
    const TAU: f64 = 0.02;
    const THETA_LIMIT: f64 = 12.0 * 2.0 * PI / 360.0;
    const X_LIMIT: f64 = 2.4;
}

impl Dynamics for CartPole {
    fn action_space(&self) -> ActionSpace {
        ActionSpace::Discrete { n: 2 }
    }

    fn observation_len(&self) -> usize {
        4
    }

    fn reset(&mut self, rng: &mut Rng) {
        self.state = std::array::from_fn(|_| rng.uniform(-0.05, 0.05));
    }

    fn step(&mut self, action: &Action) -> (f32, bool) {
        let [x, x_dot, theta, theta_dot] = self.state;
        let force = if discrete(action, 2) == 1 { Self::FORCE } else { -Self::FORCE };
        let (sin, cos) = theta.sin_cos();
        let temp =
            (force + Self::POLE_MASS_LENGTH * theta_dot * theta_dot * sin) / Self::TOTAL_MASS;
        let theta_acc = (Self::GRAVITY * sin - cos * temp)
            / (Self::LENGTH * (4.0 / 3.0 - Self::MASS_POLE * cos * cos / Self::TOTAL_MASS));
        let x_acc = temp - Self::POLE_MASS_LENGTH * theta_acc * cos / Self::TOTAL_MASS;
        self.state = [
            x + Self::TAU * x_dot,
            x_dot + Self::TAU * x_acc,
            theta + Self::TAU * theta_dot,
            theta_dot + Self::TAU * theta_acc,
        ];
        let [x, _, theta, _] = self.state;
        let terminated = !(-Self::X_LIMIT..=Self::X_LIMIT).contains(&x)
            || !(-Self::THETA_LIMIT..=Self::THETA_LIMIT).contains(&theta);
        (1.0, terminated)
    }

    fn observation(&self) -> Vec<f32> {
        self.state.iter().map(|&v| v as f32).collect()
    }

    fn draw(&self) -> Frame {
        // Gym's layout at half its size: the track spans the cart's allowed range.
        let mut canvas = Canvas::new(300, 200);
        let scale = canvas.width() / (2.0 * Self::X_LIMIT);
        let [x, _, theta, _] = self.state;
        let (cart_x, track_y) = (canvas.width() / 2.0 + x * scale, canvas.height() - 50.0);
        canvas.line((0.0, track_y), (canvas.width(), track_y), 1.0, INK);
        canvas.rect((cart_x - 12.5, track_y - 7.5), (cart_x + 12.5, track_y + 7.5), INK);
        let axle = (cart_x, track_y - 2.5);
        let pole_length = 2.0 * Self::LENGTH * scale;
        let tip = (axle.0 + pole_length * theta.sin(), axle.1 - pole_length * theta.cos());
        canvas.line(axle, tip, 5.0, POLE);
        canvas.disc(axle, 2.5, JOINT);
        canvas.into_frame()
    }

    fn step_seconds(&self) -> f64 {
        Self::TAU
    }
}

/// Gym's Acrobot ("book" dynamics): a two-link pendulum with torque -1, 0 or +1 on the
/// joint between the links, one RK4 step of 0.2 s per action.
#[derive(Default)]
struct Acrobot {
    /// theta1, theta2, dtheta1, dtheta2
    state: [f64; 4],
}

impl Acrobot {
    const LINK_LENGTH_1: f64 = 1.0;
    const LINK_MASS_1: f64 = 1.0;
    const LINK_MASS_2: f64 = 1.0;
    const LINK_COM_1: f64 = 0.5;
    const LINK_COM_2: f64 = 0.5;
    const LINK_MOI: f64 = 1.0;
    const MAX_VEL_1: f64 = 4.0 * PI;
    const MAX_VEL_2: f64 = 9.0 * PI;
    const DT: f64 = 0.2;
    const TORQUES: [f64; 3] = [-1.0, 0.0, 1.0];

    /// Time derivative of (theta1, theta2, dtheta1, dtheta2) under `torque`.
    fn derivatives(s: [f64; 4], torque: f64) -> [f64; 4] {
        let (m1, m2) = (Self::LINK_MASS_1, Self::LINK_MASS_2);
        let (l1, lc1, lc2) = (Self::LINK_LENGTH_1, Self::LINK_COM_1, Self::LINK_COM_2);
        let (i1, i2) = (Self::LINK_MOI, Self::LINK_MOI);
        let g = 9.8;
        let [theta1, theta2, dtheta1, dtheta2] = s;
        let d1 =
            m1 * lc1 * lc1 + m2 * (l1 * l1 + lc2 * lc2 + 2.0 * l1 * lc2 * theta2.cos()) + i1 + i2;
        let d2 = m2 * (lc2 * lc2 + l1 * lc2 * theta2.cos()) + i2;
        let phi2 = m2 * lc2 * g * (theta1 + theta2 - PI / 2.0).cos();
        let phi1 = -m2 * l1 * lc2 * dtheta2 * dtheta2 * theta2.sin()
            - 2.0 * m2 * l1 * lc2 * dtheta2 * dtheta1 * theta2.sin()
            + (m1 * lc1 + m2 * l1) * g * (theta1 - PI / 2.0).cos()
            + phi2;
        let ddtheta2 =
            (torque + d2 / d1 * phi1 - m2 * l1 * lc2 * dtheta1 * dtheta1 * theta2.sin() - phi2)
                / (m2 * lc2 * lc2 + i2 - d2 * d2 / d1);
        let ddtheta1 = -(d2 * ddtheta2 + phi1) / d1;
        [dtheta1, dtheta2, ddtheta1, ddtheta2]
    }

    fn terminal(&self) -> bool {
        let [theta1, theta2, ..] = self.state;
        -theta1.cos() - (theta2 + theta1).cos() > 1.0
    }
}

/// Gym's `wrap`: shifts `x` by whole periods into [low, high].
fn wrap(mut x: f64, low: f64, high: f64) -> f64 {
    let period = high - low;
    while x > high {
        x -= period;
    }
    while x < low {
        x += period;
    }
    x
}

impl Dynamics for Acrobot {
    fn action_space(&self) -> ActionSpace {
        ActionSpace::Discrete { n: 3 }
    }

    fn observation_len(&self) -> usize {
        6
    }

    fn reset(&mut self, rng: &mut Rng) {
        self.state = std::array::from_fn(|_| rng.uniform(-0.1, 0.1));
    }

    fn step(&mut self, action: &Action) -> (f32, bool) {
        let torque = Self::TORQUES[discrete(action, 3)];
        let s = self.state;
        let offset = |base: [f64; 4], k: [f64; 4], h: f64| -> [f64; 4] {
            std::array::from_fn(|i| base[i] + h * k[i])
        };
        let h = Self::DT;
        let k1 = Self::derivatives(s, torque);
        let k2 = Self::derivatives(offset(s, k1, h / 2.0), torque);
        let k3 = Self::derivatives(offset(s, k2, h / 2.0), torque);
        let k4 = Self::derivatives(offset(s, k3, h), torque);
        let next: [f64; 4] =
            std::array::from_fn(|i| s[i] + h / 6.0 * (k1[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i]));
        self.state = [
            wrap(next[0], -PI, PI),
            wrap(next[1], -PI, PI),
            next[2].clamp(-Self::MAX_VEL_1, Self::MAX_VEL_1),
            next[3].clamp(-Self::MAX_VEL_2, Self::MAX_VEL_2),
        ];
        let terminated = self.terminal();
        (if terminated { 0.0 } else { -1.0 }, terminated)
    }

    fn observation(&self) -> Vec<f32> {
        let [theta1, theta2, dtheta1, dtheta2] = self.state;
        [theta1.cos(), theta1.sin(), theta2.cos(), theta2.sin(), dtheta1, dtheta2]
            .iter()
            .map(|&v| v as f32)
            .collect()
    }

    fn draw(&self) -> Frame {
        let mut canvas = Canvas::new(200, 200);
        let scale = canvas.width() / 4.4;
        let center = (canvas.width() / 2.0, canvas.height() / 2.0);
        let [theta1, theta2, ..] = self.state;
        let point = |from: (f64, f64), angle: f64| {
            (from.0 + scale * angle.sin(), from.1 + scale * angle.cos())
        };
        let target_y = center.1 - scale * 1.0;
        canvas.line((0.0, target_y), (canvas.width(), target_y), 1.0, INK);
        let elbow = point(center, theta1);
        let hand = point(elbow, theta1 + theta2);
        canvas.line(center, elbow, 8.0, INK);
        canvas.line(elbow, hand, 8.0, INK);
        canvas.disc(center, 4.0, JOINT);
        canvas.disc(elbow, 4.0, JOINT);
        canvas.into_frame()
    }

    fn step_seconds(&self) -> f64 {
        Self::DT
    }
}

/// Shared by both mountain-car tasks: the track's bounds and the inelastic left wall.
const CAR_MIN_POSITION: f64 = -1.2;
const CAR_MAX_POSITION: f64 = 0.6;
const CAR_MAX_SPEED: f64 = 0.07;

/// Moves the car one step with `velocity` already updated by the caller's force.
fn move_car(position: &mut f64, velocity: &mut f64) {
    *velocity = velocity.clamp(-CAR_MAX_SPEED, CAR_MAX_SPEED);
    *position = (*position + *velocity).clamp(CAR_MIN_POSITION, CAR_MAX_POSITION);
    if *position == CAR_MIN_POSITION && *velocity < 0.0 {
        *velocity = 0.0;
    }
}

/// The mountain cars' dynamics have no time unit; recordings play at Gym's 30 Hz.
const MOUNTAIN_CAR_STEP_SECONDS: f64 = 1.0 / 30.0;

/// The hill (Gym's height 0.45 sin(3x) + 0.55), the car on it and the goal flag.
fn draw_mountain_car(position: f64, goal: f64) -> Frame {
    let mut canvas = Canvas::new(300, 200);
    let scale = canvas.width() / (CAR_MAX_POSITION - CAR_MIN_POSITION);
    let ground = canvas.height() - 10.0;
    let to_pixels = |x: f64| {
        let height = 0.45 * (3.0 * x).sin() + 0.55;
        ((x - CAR_MIN_POSITION) * scale, ground - height * scale)
    };
    let samples = 100;
    for step in 0..samples {
        let along = |step: usize| {
            CAR_MIN_POSITION + (CAR_MAX_POSITION - CAR_MIN_POSITION) * step as f64 / samples as f64
        };
        canvas.line(to_pixels(along(step)), to_pixels(along(step + 1)), 2.0, INK);
    }
    let flag = to_pixels(goal);
    canvas.line(flag, (flag.0, flag.1 - 30.0), 2.0, INK);
    canvas.rect((flag.0, flag.1 - 30.0), (flag.0 + 15.0, flag.1 - 22.0), FLAG);
    let car = to_pixels(position);
    canvas.disc((car.0, car.1 - 8.0), 8.0, JOINT);
    canvas.into_frame()
}

/// Gym's MountainCar: push left, nothing or right; -1 per step until the flag at 0.5.
#[derive(Default)]
struct MountainCar {
    position: f64,
    velocity: f64,
}

impl Dynamics for MountainCar {
    fn action_space(&self) -> ActionSpace {
        ActionSpace::Discrete { n: 3 }
    }

    fn observation_len(&self) -> usize {
        2
    }

    fn reset(&mut self, rng: &mut Rng) {
        self.position = rng.uniform(-0.6, -0.4);
        self.velocity = 0.0;
    }

    fn step(&mut self, action: &Action) -> (f32, bool) {
        let push = discrete(action, 3) as f64 - 1.0;
        self.velocity += push * 0.001 + (3.0 * self.position).cos() * -0.0025;
        move_car(&mut self.position, &mut self.velocity);
        let terminated = self.position >= 0.5 && self.velocity >= 0.0;
        (-1.0, terminated)
    }

    fn observation(&self) -> Vec<f32> {
        vec![self.position as f32, self.velocity as f32]
    }

    fn draw(&self) -> Frame {
        draw_mountain_car(self.position, 0.5)
    }

    fn step_seconds(&self) -> f64 {
        MOUNTAIN_CAR_STEP_SECONDS
    }
}

/// Gym's MountainCarContinuous: force in [-1, 1], +100 at the flag at 0.45, minus 0.1
/// times the squared action each step.
#[derive(Default)]
struct MountainCarContinuous {
    position: f64,
    velocity: f64,
}

impl Dynamics for MountainCarContinuous {
    fn action_space(&self) -> ActionSpace {
        ActionSpace::Continuous { low: vec![-1.0], high: vec![1.0] }
    }

    fn observation_len(&self) -> usize {
        2
    }

    fn reset(&mut self, rng: &mut Rng) {
        self.position = rng.uniform(-0.6, -0.4);
        self.velocity = 0.0;
    }

    fn step(&mut self, action: &Action) -> (f32, bool) {
        let action = continuous(action);
        let force = action.clamp(-1.0, 1.0);
        self.velocity += force * 0.0015 - 0.0025 * (3.0 * self.position).cos();
        move_car(&mut self.position, &mut self.velocity);
        let terminated = self.position >= 0.45 && self.velocity >= 0.0;
        let reward = if terminated { 100.0 } else { 0.0 } - action * action * 0.1;
        (reward as f32, terminated)
    }

    fn observation(&self) -> Vec<f32> {
        vec![self.position as f32, self.velocity as f32]
    }

    fn draw(&self) -> Frame {
        draw_mountain_car(self.position, 0.45)
    }

    fn step_seconds(&self) -> f64 {
        MOUNTAIN_CAR_STEP_SECONDS
    }
}

/// Gym's Pendulum-v1: swing up and balance with torque in [-2, 2]; never terminates.
#[derive(Default)]
struct Pendulum {
    theta: f64,
    theta_dot: f64,
}

impl Pendulum {
    const MAX_SPEED: f64 = 8.0;
    const MAX_TORQUE: f64 = 2.0;
    const DT: f64 = 0.05;
    const G: f64 = 10.0;
    const M: f64 = 1.0;
    const L: f64 = 1.0;
}

/// Gym's angle_normalize: the angle in [-pi, pi), with Python's floored modulo.
fn normalize_angle(x: f64) -> f64 {
    (x + PI).rem_euclid(2.0 * PI) - PI
}

impl Dynamics for Pendulum {
    fn action_space(&self) -> ActionSpace {
        ActionSpace::Continuous {
            low: vec![-Self::MAX_TORQUE as f32],
            high: vec![Self::MAX_TORQUE as f32],
        }
    }

    fn observation_len(&self) -> usize {
        3
    }

    fn reset(&mut self, rng: &mut Rng) {
        self.theta = rng.uniform(-PI, PI);
        self.theta_dot = rng.uniform(-1.0, 1.0);
    }

    fn step(&mut self, action: &Action) -> (f32, bool) {
        let torque = continuous(action).clamp(-Self::MAX_TORQUE, Self::MAX_TORQUE);
        let (th, thdot) = (self.theta, self.theta_dot);
        let cost = normalize_angle(th).powi(2) + 0.1 * thdot * thdot + 0.001 * torque * torque;
        let new_thdot = (thdot
            + (3.0 * Self::G / (2.0 * Self::L) * th.sin()
                + 3.0 / (Self::M * Self::L * Self::L) * torque)
                * Self::DT)
            .clamp(-Self::MAX_SPEED, Self::MAX_SPEED);
        self.theta = th + new_thdot * Self::DT;
        self.theta_dot = new_thdot;
        (-cost as f32, false)
    }

    fn observation(&self) -> Vec<f32> {
        vec![self.theta.cos() as f32, self.theta.sin() as f32, self.theta_dot as f32]
    }

    fn draw(&self) -> Frame {
        let mut canvas = Canvas::new(200, 200);
        let center = (canvas.width() / 2.0, canvas.height() / 2.0);
        let length = 0.4 * canvas.width();
        // Upright at theta 0, turning counter-clockwise as theta grows.
        let tip = (center.0 - length * self.theta.sin(), center.1 - length * self.theta.cos());
        canvas.line(center, tip, 16.0, ROD);
        canvas.disc(center, 4.0, JOINT);
        canvas.into_frame()
    }

    fn step_seconds(&self) -> f64 {
        Self::DT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(actual: f64, expected: f64) {
        assert!((actual - expected).abs() < 1e-12, "{actual} != {expected}");
    }

    /// Rewards are f32, so they carry f32 rounding of the f64 physics.
    fn close_f32(actual: f32, expected: f64) {
        let tolerance = f64::from(f32::EPSILON) * expected.abs().max(1.0);
        assert!((f64::from(actual) - expected).abs() < tolerance, "{actual} != {expected}");
    }

    /// One CartPole step from a known state, against Gym's equations worked by hand:
    /// from rest upright, pushing right with 10 N gives
    /// temp = 10/1.1, theta_acc = -temp / (0.5 (4/3 - 0.1/1.1)),
    /// x_acc = temp - 0.05 theta_acc / 1.1; positions move by the old velocities.
    #[test]
    fn cartpole_step_matches_equations() {
        let mut pole = CartPole { state: [0.0, 0.0, 0.0, 0.0] };
        let (reward, terminated) = pole.step(&Action::Discrete(1));
        let temp = 10.0 / 1.1;
        let theta_acc = -temp / (0.5 * (4.0 / 3.0 - 0.1 / 1.1));
        let x_acc = temp - 0.05 * theta_acc / 1.1;
        assert_eq!((reward, terminated), (1.0, false));
        close(pole.state[0], 0.0);
        close(pole.state[1], 0.02 * x_acc);
        close(pole.state[2], 0.0);
        close(pole.state[3], 0.02 * theta_acc);
        // The next step moves the positions by those velocities.
        pole.step(&Action::Discrete(0));
        close(pole.state[0], 0.02 * 0.02 * x_acc);
        close(pole.state[2], 0.02 * 0.02 * theta_acc);
    }

    /// CartPole ends when the pole passes 12 degrees or the cart leaves +-2.4.
    #[test]
    fn cartpole_terminates_at_bounds() {
        let limit = 12.0 * 2.0 * PI / 360.0;
        // Euler moves theta by the old angular velocity: 0.02 s * 0.1 rad/s > 1e-3 rad.
        let mut pole = CartPole { state: [0.0, 0.0, limit - 1e-3, 0.1] };
        assert!(pole.step(&Action::Discrete(0)).1, "the pole tips past the limit");
        let mut pole = CartPole { state: [2.39, 1.0, 0.0, 0.0] };
        assert!(pole.step(&Action::Discrete(1)).1, "the cart leaves the track");
        let mut pole = CartPole { state: [0.0, 0.0, 0.0, 0.0] };
        assert!(!pole.step(&Action::Discrete(1)).1);
    }

    /// CartPole-v0 truncates at 200 steps and v1 at 500, counting from each reset.
    #[test]
    fn cartpole_time_limits() {
        for (id, limit) in [("CartPole-v0", 200), ("CartPole-v1", 500)] {
            let mut env = make(id, 1).unwrap();
            // Keep the pole up with a bang-bang controller on theta and theta_dot.
            let mut observation = env.reset(None).unwrap();
            for step in 1..=limit {
                let push_right = observation[2] + 0.5 * observation[3] > 0.0;
                let result = env.step(&Action::Discrete(push_right as usize)).unwrap();
                assert!(!result.terminated, "{id} fell at step {step}");
                assert_eq!(result.truncated, step == limit, "{id} step {step}");
                observation = result.observation;
            }
        }
    }

    /// Acrobot's derivatives at rest hanging down under zero torque are zero, and a
    /// torque accelerates the second joint by (tau) / (m2 lc2^2 + I2 - d2^2/d1) with
    /// d1 = 0.25 + (1 + 0.25 + 1) + 2 = 4.5 and d2 = 0.25 + 0.5 + 1 = 1.75.
    #[test]
    fn acrobot_derivatives_match_equations() {
        let at_rest = Acrobot::derivatives([0.0; 4], 0.0);
        for value in at_rest {
            close(value, 0.0);
        }
        let pushed = Acrobot::derivatives([0.0; 4], 1.0);
        let (d1, d2) = (4.5, 1.75);
        let ddtheta2 = 1.0 / (0.25 + 1.0 - d2 * d2 / d1);
        close(pushed[3], ddtheta2);
        close(pushed[2], -(d2 * ddtheta2) / d1);
    }

    /// Acrobot wraps angles into [-pi, pi], bounds velocities, and ends when the tip
    /// rises a link's length above the pivot.
    #[test]
    fn acrobot_wraps_and_terminates() {
        close(wrap(3.5 * PI, -PI, PI), -0.5 * PI);
        close(wrap(-1.5 * PI, -PI, PI), 0.5 * PI);
        let upright = Acrobot { state: [PI, 0.0, 0.0, 0.0] };
        assert!(upright.terminal());
        let hanging = Acrobot { state: [0.0, 0.0, 0.0, 0.0] };
        assert!(!hanging.terminal());
        let mut spinning = Acrobot { state: [0.0, 0.0, 100.0, 100.0] };
        spinning.step(&Action::Discrete(1));
        assert!(spinning.state[2].abs() <= 4.0 * PI && spinning.state[3].abs() <= 9.0 * PI);
    }

    /// MountainCar: velocity += (a - 1) 0.001 - 0.0025 cos(3 p), then position += v;
    /// the left wall stops the car.
    #[test]
    fn mountain_car_step_matches_equations() {
        let mut car = MountainCar { position: -0.5, velocity: 0.0 };
        let (reward, terminated) = car.step(&Action::Discrete(2));
        let velocity = 0.001 - 0.0025 * (-1.5f64).cos();
        close(car.velocity, velocity);
        close(car.position, -0.5 + velocity);
        assert_eq!((reward, terminated), (-1.0, false));
        let mut car = MountainCar { position: -1.19, velocity: -0.05 };
        car.step(&Action::Discrete(0));
        assert_eq!((car.position, car.velocity), (-1.2, 0.0));
        let mut car = MountainCar { position: 0.49, velocity: 0.05 };
        assert!(car.step(&Action::Discrete(1)).1);
    }

    /// MountainCarContinuous pays 100 at the flag and 0.1 a^2 for effort, with the
    /// force clipped to [-1, 1] but the cost on the raw action.
    #[test]
    fn mountain_car_continuous_rewards() {
        let mut car = MountainCarContinuous { position: -0.5, velocity: 0.0 };
        let (reward, _) = car.step(&Action::Continuous(vec![2.0]));
        close(car.velocity, 0.0015 - 0.0025 * (-1.5f64).cos());
        close_f32(reward, -0.4);
        let mut car = MountainCarContinuous { position: 0.44, velocity: 0.06 };
        let (reward, terminated) = car.step(&Action::Continuous(vec![0.5]));
        assert!(terminated);
        close_f32(reward, 100.0 - 0.025);
    }

    /// Pendulum: cost = th^2 + 0.1 thdot^2 + 0.001 u^2 on the old state, then
    /// thdot += (15 sin th + 3 u) 0.05, clipped to +-8, and th += thdot 0.05.
    #[test]
    fn pendulum_step_matches_equations() {
        let mut pendulum = Pendulum { theta: 0.5, theta_dot: 1.0 };
        let (reward, terminated) = pendulum.step(&Action::Continuous(vec![3.0]));
        let cost = 0.25 + 0.1 + 0.001 * 4.0;
        let thdot = 1.0 + (15.0 * 0.5f64.sin() + 3.0 * 2.0) * 0.05;
        assert!(!terminated);
        assert!((f64::from(reward) + cost).abs() < 1e-6);
        close(pendulum.theta_dot, thdot);
        close(pendulum.theta, 0.5 + thdot * 0.05);
        let mut fast = Pendulum { theta: 0.0, theta_dot: 7.9 };
        fast.step(&Action::Continuous(vec![2.0]));
        assert_eq!(fast.theta_dot, 8.0);
        close(normalize_angle(3.0 * PI / 2.0), -PI / 2.0);
    }

    /// Pendulum-v1 runs exactly 200 steps; the observation is (cos, sin, thdot).
    #[test]
    fn pendulum_truncates_at_200() {
        let mut env = make("Pendulum-v1", 3).unwrap();
        let observation = env.reset(None).unwrap();
        assert_eq!(observation.len(), 3);
        assert!((observation[0].powi(2) + observation[1].powi(2) - 1.0).abs() < 1e-5);
        for step in 1..=200 {
            let result = env.step(&Action::Continuous(vec![0.0])).unwrap();
            assert_eq!(result.truncated, step == 200);
            assert!(!result.terminated);
        }
    }

    /// The same seed gives the same episode; a new seed on reset restarts the stream.
    #[test]
    fn seeds_fix_episodes() {
        let play = |env: &mut Box<dyn Env>, seed| {
            let mut trace = env.reset(Some(seed)).unwrap();
            for step in 0..50 {
                trace.extend(env.step(&Action::Discrete(step % 3)).unwrap().observation);
            }
            trace
        };
        let mut env = make("Acrobot-v1", 9).unwrap();
        let first = play(&mut env, 4);
        assert_eq!(first, play(&mut env, 4));
        assert_ne!(first, play(&mut env, 5));
    }
}
