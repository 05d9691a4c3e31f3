//! The shared model on the CPU, with the optimizer statistics beside it: the one
//! place where trainers and the test agent read and update it.
//!
//! Updates are Hogwild (Recht et al., 2011): optimizer steps from many threads run at
//! once on the same tensors without excluding each other, as in the reference. A
//! pull, the copy of every weight into a local model, is kept apart from them: a copy
//! that ran beside a step could take some tensors before that step and some after it,
//! or a tensor half-updated, and the rollout and its gradient would then be computed
//! with weights no update ever produced. So steps share a lock among themselves and a
//! pull holds it alone; a pull of the Atari model's 13 MB takes about a millisecond.

use std::sync::{Arc, RwLock};

use tch::{nn, Device, Tensor};

use crate::checkpoint::{self, SavedCounters};
use crate::console;
use crate::error::Result;
use crate::gradients::GradientBuffer;
use crate::model::{ActorCritic, ModelSpec};
use crate::shared_optim::{LearningRate, OptimizerKind, SharedOptimizer};

/// A handle on the shared weights and an optimizer over them. Handles are cheap to
/// make ([`SharedModel::handle`]) and each thread holds its own.
pub struct SharedModel {
    /// The shared weights, in the model's parameter order.
    parameters: Vec<Tensor>,
    optimizer: SharedOptimizer,
    /// Held shared by optimizer steps and alone by pulls.
    access: Arc<RwLock<()>>,
}

impl SharedModel {
    /// A handle over `parameters` (the shared model's, on the CPU) and `optimizer`.
    pub fn new(parameters: &[Tensor], optimizer: SharedOptimizer) -> Self {
        SharedModel {
            parameters: parameters.iter().map(Tensor::shallow_clone).collect(),
            optimizer,
            access: Arc::default(),
        }
    }

    /// A handle over `model`'s parameters (the shared model, on the CPU) with fresh
    /// statistics of a `kind` optimizer.
    pub fn over(model: &ActorCritic, kind: OptimizerKind, learning_rate: LearningRate) -> Self {
        let parameters: Vec<Tensor> =
            model.parameters().iter().map(|(_, tensor)| tensor.shallow_clone()).collect();
        let optimizer = SharedOptimizer::new(kind, learning_rate, &parameters);
        SharedModel::new(&parameters, optimizer)
    }

    /// Another handle on the same weights and the same optimizer statistics.
    pub fn handle(&self) -> Self {
        self.with_optimizer(self.optimizer.share())
    }

    /// Another handle on the same weights that steps with an optimizer of its own
    /// (--shared-optimizer false).
    pub fn with_optimizer(&self, optimizer: SharedOptimizer) -> Self {
        SharedModel {
            parameters: self.parameters.iter().map(Tensor::shallow_clone).collect(),
            optimizer,
            access: Arc::clone(&self.access),
        }
    }

    /// The weights, for reading outside training (checkpoints, tests).
    pub fn parameters(&self) -> &[Tensor] {
        &self.parameters
    }

    /// This handle's optimizer.
    pub fn optimizer(&self) -> &SharedOptimizer {
        &self.optimizer
    }

    /// Copies the shared weights into `local` (same order and shapes, on any
    /// device), with no optimizer step under way, so that they are one set of weights.
    pub fn pull(&self, local: &[Tensor]) {
        let _alone = self.access.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        copy_weights(&self.parameters, local);
    }

    /// Copies of the weights on the CPU, taken as [`SharedModel::pull`] takes them.
    pub fn snapshot(&self) -> Vec<Tensor> {
        let copies: Vec<Tensor> = self
            .parameters
            .iter()
            .map(|tensor| Tensor::empty(tensor.size(), (tensor.kind(), Device::Cpu)))
            .collect();
        self.pull(&copies);
        copies
    }

    /// Copies of the optimizer statistics with their checkpoint names, taken as
    /// [`SharedModel::pull`] takes the weights. Read mid-step, a statistic can hold
    /// values no step leaves behind: a checkpoint written beside training found NaN in
    /// Pendulum's second moments that a copy taken a moment later did not have.
    pub fn statistics(&self, names: &[String]) -> Vec<(String, Tensor)> {
        let _alone = self.access.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        self.optimizer
            .named_statistics(names)
            .into_iter()
            .map(|(name, tensor)| (name, tensor.copy()))
            .collect()
    }

    /// Applies one update from `gradients` (on the CPU, in parameter order) through
    /// this handle's optimizer, beside any other thread's step, at the learning rate
    /// of a run that has played `agent_steps` agent steps.
    pub fn step(&self, gradients: &[Tensor], agent_steps: u64) {
        let _beside_other_steps =
            self.access.read().unwrap_or_else(|poisoned| poisoned.into_inner());
        self.optimizer.step(&self.parameters, gradients, agent_steps);
    }

    /// How many values the weights hold, all tensors together.
    pub fn numel(&self) -> usize {
        self.parameters.iter().map(Tensor::numel).sum()
    }

    /// Copies the weights, flattened in parameter order, into `flat`, taken as
    /// [`SharedModel::pull`] takes them.
    pub fn read_flat(&self, flat: &mut [f32]) {
        let _alone = self.access.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut offset = 0;
        for tensor in &self.parameters {
            let count = tensor.numel();
            tensor.contiguous().view(-1).copy_data(&mut flat[offset..offset + count], count);
            offset += count;
        }
    }

    /// Replaces the weights with `flat` (parameter order), with no step under way:
    /// how a rank takes rank 0's model.
    pub fn write_flat(&self, flat: &[f32]) {
        let _alone = self.access.write().unwrap_or_else(|poisoned| poisoned.into_inner());
        self.update_flat(flat, |target, values| target.copy_(values));
    }

    /// Adds `flat` (parameter order) to the weights beside any thread's optimizer
    /// step, as a step does: a sync's correction, which must not undo the Hogwild
    /// updates landing while it is applied.
    pub fn add_flat(&self, flat: &[f32]) {
        let _beside_other_steps =
            self.access.read().unwrap_or_else(|poisoned| poisoned.into_inner());
        self.update_flat(flat, |target, values| {
            let _ = target.f_add_(values);
        });
    }

    fn update_flat(&self, flat: &[f32], mut apply: impl FnMut(&mut Tensor, &Tensor)) {
        tch::no_grad(|| {
            let mut offset = 0;
            for tensor in &self.parameters {
                let count = tensor.numel();
                let values = Tensor::from_slice(&flat[offset..offset + count])
                    .view(tensor.size().as_slice());
                apply(&mut tensor.shallow_clone(), &values);
                offset += count;
            }
        });
    }

    /// Loads a checkpoint read for `--load` into the weights and this handle's
    /// optimizer; returns the counters to continue from and the best test score.
    pub fn resume(
        &self,
        loaded: &checkpoint::Checkpoint,
        names: &[String],
        optimizer_kind: OptimizerKind,
    ) -> Result<(SavedCounters, Option<f64>)> {
        let advice = checkpoint::SIDECAR_MISMATCH;
        let named = |tensors: &[Tensor]| -> Vec<(String, Tensor)> {
            names.iter().cloned().zip(tensors.iter().map(Tensor::shallow_clone)).collect()
        };
        checkpoint::copy_matching(
            &loaded.files.model,
            &loaded.model,
            &named(&self.parameters),
            advice,
        )?;
        match &loaded.optimizer {
            Some(statistics) if loaded.sidecar.optimizer == optimizer_kind => {
                let targets: Vec<(String, Tensor)> = self
                    .optimizer
                    .named_statistics(names)
                    .into_iter()
                    .map(|(name, tensor)| (name, tensor.shallow_clone()))
                    .collect();
                checkpoint::copy_matching(&loaded.files.optimizer, statistics, &targets, advice)?;
                self.optimizer.set_steps(loaded.sidecar.counters.updates);
            }
            Some(_) => console::warn(&format!(
                "note: the checkpoint's optimizer statistics are {}'s, and this run asks for {optimizer_kind}; \
                 starting them afresh (leave out --optimizer and --amsgrad to keep them)",
                loaded.sidecar.optimizer
            )),
            None => console::warn(&format!(
                "note: {} is missing, so the optimizer statistics start afresh",
                loaded.files.optimizer.display()
            )),
        }
        console::say(&format!(
            "resumed {} at {} agent steps",
            loaded.files.model.display(),
            loaded.sidecar.counters.agent_steps
        ));
        Ok((loaded.sidecar.counters, loaded.sidecar.best_score))
    }
}

/// A thread's local copy of the model, with its own gradients.
pub struct LocalModel {
    // Owns the variables that `model` and `parameters` point into.
    _store: nn::VarStore,
    pub model: ActorCritic,
    /// The model's parameters in its parameter order (that of the shared handles).
    pub parameters: Vec<Tensor>,
    /// Where the parameters' gradients live, and their way to the shared model.
    pub gradients: GradientBuffer,
}

impl LocalModel {
    /// A copy of `spec`'s network on `device`, its gradients in one buffer.
    pub fn new(spec: &ModelSpec, device: Device) -> Self {
        let store = nn::VarStore::new(device);
        let model = ActorCritic::new(&store, spec);
        let parameters: Vec<Tensor> =
            model.parameters().iter().map(|(_, tensor)| tensor.shallow_clone()).collect();
        let gradients = GradientBuffer::new(&parameters, device);
        LocalModel { _store: store, model, parameters, gradients }
    }
}

/// Copies `source` into `target` tensor by tensor, outside autograd.
pub fn copy_weights(source: &[Tensor], target: &[Tensor]) {
    tch::no_grad(|| {
        for (source, target) in source.iter().zip(target) {
            let mut target = target.shallow_clone();
            target.copy_(source);
        }
    });
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::thread;

    use tch::Kind;

    use super::*;

    /// A pull never sees a step half done: one thread keeps stepping two tensors with
    /// a gradient that moves both by the same amount, the other keeps pulling, and
    /// every pulled pair is equal. Without the lock such pairs differ within a few
    /// hundred pulls (a step spends its time between the first tensor and the second).
    #[test]
    fn a_pull_sees_whole_steps() {
        let parameters: Vec<Tensor> =
            (0..2).map(|_| Tensor::zeros([200_000], (Kind::Float, Device::Cpu))).collect();
        let optimizer =
            SharedOptimizer::new(OptimizerKind::RmsProp, LearningRate::constant(1e-3), &parameters);
        let shared = SharedModel::new(&parameters, optimizer);
        let stepper = shared.handle();
        let done = Arc::new(AtomicBool::new(false));
        let stepping = {
            let done = Arc::clone(&done);
            thread::spawn(move || {
                let gradients: Vec<Tensor> =
                    (0..2).map(|_| Tensor::ones([200_000], (Kind::Float, Device::Cpu))).collect();
                while !done.load(Ordering::Relaxed) {
                    stepper.step(&gradients, 0);
                }
            })
        };
        let local: Vec<Tensor> =
            (0..2).map(|_| Tensor::zeros([200_000], (Kind::Float, Device::Cpu))).collect();
        for _ in 0..300 {
            shared.pull(&local);
            let difference = (&local[0] - &local[1]).abs().max().double_value(&[]);
            assert_eq!(difference, 0.0, "a pull mixed two steps");
        }
        done.store(true, Ordering::Relaxed);
        stepping.join().unwrap();
        assert!(shared.optimizer().steps() > 0);
    }
}
