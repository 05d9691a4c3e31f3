//! The environment around a simulated task (classic control, Box2D): Gym's TimeLimit,
//! seeding through the task's own random source, and the step counters.

use super::{Action, ActionSpace, Env, Frame, Step};
use crate::error::Result;

/// One simulated task: its physics, what the agent sees, and its picture. `R` is the
/// random source its resets and steps draw from.
pub(super) trait Task<R>: Send {
    fn action_space(&self) -> ActionSpace;
    fn observation_len(&self) -> usize;
    /// Starts an episode; returns the first observation.
    fn reset(&mut self, random: &mut R) -> Vec<f32>;
    /// Plays one action: the observation, the reward and whether the task ended it.
    fn step(&mut self, action: &Action, random: &mut R) -> (Vec<f32>, f32, bool);
    /// A picture of the state, for recordings.
    fn draw(&self) -> Frame;
    /// Simulated time per step, in seconds.
    fn step_seconds(&self) -> f64;
}

/// A task under Gym's TimeLimit: truncated once `max_episode_steps` steps were taken.
pub(super) struct TimeLimited<R> {
    id: &'static str,
    task: Box<dyn Task<R>>,
    random: R,
    /// How a seed becomes the task's random source.
    seeded: fn(u64) -> R,
    action_space: ActionSpace,
    observation_shape: Vec<i64>,
    max_episode_steps: u32,
    elapsed_steps: u32,
    physics_steps: u64,
}

impl<R: Send + 'static> TimeLimited<R> {
    pub(super) fn boxed(
        id: &'static str,
        task: Box<dyn Task<R>>,
        seed: u64,
        seeded: fn(u64) -> R,
        max_episode_steps: u32,
    ) -> Box<dyn Env> {
        let action_space = task.action_space();
        let observation_shape = vec![task.observation_len() as i64];
        Box::new(TimeLimited {
            id,
            task,
            random: seeded(seed),
            seeded,
            action_space,
            observation_shape,
            max_episode_steps,
            elapsed_steps: 0,
            physics_steps: 0,
        })
    }
}

impl<R: Send> Env for TimeLimited<R> {
    fn id(&self) -> &str {
        self.id
    }

    fn action_space(&self) -> &ActionSpace {
        &self.action_space
    }

    fn observation_shape(&self) -> &[i64] {
        &self.observation_shape
    }

    fn reset(&mut self, seed: Option<u64>) -> Result<Vec<f32>> {
        if let Some(seed) = seed {
            self.random = (self.seeded)(seed);
        }
        self.elapsed_steps = 0;
        Ok(self.task.reset(&mut self.random))
    }

    fn step(&mut self, action: &Action) -> Result<Step> {
        let (observation, reward, terminated) = self.task.step(action, &mut self.random);
        self.elapsed_steps += 1;
        self.physics_steps += 1;
        Ok(Step {
            observation,
            reward,
            terminated,
            truncated: self.elapsed_steps >= self.max_episode_steps,
            lives: 0,
            life_lost: false,
        })
    }

    fn env_frames(&self) -> u64 {
        self.physics_steps
    }

    fn render(&mut self) -> Result<Frame> {
        Ok(self.task.draw())
    }

    fn step_seconds(&self) -> f64 {
        self.task.step_seconds()
    }
}
