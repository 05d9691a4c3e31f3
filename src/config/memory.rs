//! The memory check: a run too big for the machine is refused, on one line naming
//! the flag to change, before any of it is allocated.

use crate::error::{Error, Result};
use crate::model::{Body, Head, ModelSpec};

/// Resident bytes one environment takes, with its worker's LSTM state and rollout: an
/// Atari worker measured 0.47 MB (64 Pong workers against 8 with --model universe, 6 s
/// runs, the difference in peak resident memory over 56), rounded up to 2 MB for the
/// reference network's larger screens; classic control's state is a few numbers.
fn environment_bytes(spec: &ModelSpec) -> f64 {
    match spec.body {
        Body::AtariLstm | Body::Universe | Body::Universe84 | Body::UniverseMax => {
            2.0 * 1024.0 * 1024.0
        }
        Body::Mlp { .. } => 64.0 * 1024.0,
    }
}

/// What a run keeps in memory beyond the shared model, which the memory check counts.
#[derive(Clone, Copy, Debug)]
pub struct MemoryPlan {
    /// Working copies of the model (training threads, predictors, trainers).
    pub model_copies: usize,
    /// Optimizer statistics beside the shared ones (--shared-optimizer false).
    pub optimizer_copies: usize,
    /// Environments: workers or agents, at the most the run may start.
    pub environments: usize,
}

/// Refuses a run too big for the machine before any of it is allocated: libtorch
/// would otherwise abort with a C++ trace, and a billion workers would be built for
/// minutes before the allocator gave up. Counts the shared weights, up to three
/// optimizer statistics per optimizer, each working copy with its gradients, the test
/// agent's copy, a checkpoint's copies, and every environment.
pub(super) fn check_memory(spec: &ModelSpec, plan: MemoryPlan, workers: usize) -> Result<()> {
    let Some(available) = available_memory() else { return Ok(()) };
    let parameter_bytes = spec.parameter_count() * 4.0;
    let model_bytes = |parameters: f64| parameters * 4.0 * (8.0 + 2.0 * plan.model_copies as f64);
    let model = model_bytes(spec.parameter_count());
    let optimizers = parameter_bytes * 3.0 * plan.optimizer_copies as f64;
    let environments = environment_bytes(spec) * plan.environments as f64;
    let gigabytes = |bytes: f64| bytes / 1e9;
    if model > available {
        let smallest = ModelSpec { hidden_size: 1, ..spec.clone() };
        let smallest_bytes = model_bytes(smallest.parameter_count());
        if smallest_bytes > available {
            return Err(Error::BadArguments(format!(
                "the environment's {} give {:.3e} parameters even at --hidden-size 1, which need about {:.1} GB \
                 here and {:.1} GB is available; give the environment fewer {}",
                environment_sizes(spec),
                smallest.parameter_count(),
                gigabytes(smallest_bytes),
                gigabytes(available),
                // The screen networks' inputs are a fixed size, whatever the environment's.
                if matches!(spec.body, Body::Mlp { .. }) { "actions or smaller observations" } else { "actions" }
            )));
        }
        return Err(Error::BadArguments(format!(
            "--hidden-size {} gives {:.3e} parameters, which need about {:.1} GB here (weights, optimizer \
             statistics and {} training copies) and {:.1} GB is available; pick a smaller --hidden-size",
            spec.hidden_size,
            spec.parameter_count(),
            gigabytes(model),
            plan.model_copies,
            gigabytes(available)
        )));
    }
    if model + optimizers > available {
        return Err(Error::BadArguments(format!(
            "--shared-optimizer false gives {} more copies of the optimizer statistics, which with the model \
             need about {:.1} GB here and {:.1} GB is available; share the optimizer, or pick fewer --workers \
             or a smaller --hidden-size",
            plan.optimizer_copies,
            gigabytes(model + optimizers),
            gigabytes(available)
        )));
    }
    if model + optimizers + environments > available {
        let fit = ((available - model - optimizers) / environment_bytes(spec)).floor().max(0.0);
        return Err(Error::BadArguments(format!(
            "--workers {workers} needs about {:.1} GB here for its environments and models, and {:.1} GB is \
             available; pick at most {fit} workers",
            gigabytes(model + optimizers + environments),
            gigabytes(available)
        )));
    }
    Ok(())
}

/// The sizes an environment gives the network, as a user would name them.
fn environment_sizes(spec: &ModelSpec) -> String {
    let actions = match &spec.head {
        Head::Discrete { actions } => format!("{actions} actions"),
        Head::Gaussian { low, .. } => format!("{} action dimensions", low.len()),
    };
    match spec.body {
        Body::Mlp { inputs, .. } => format!("observations of {inputs} values and {actions}"),
        _ => actions,
    }
}

/// Bytes of memory available to new allocations: MemAvailable in /proc/meminfo, or
/// less under an address-space limit (`ulimit -v`), what is left of it.
fn available_memory() -> Option<f64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let available = kilobytes(&meminfo, "MemAvailable:")? * 1024.0;
    Some(available.min(address_space_left().unwrap_or(f64::INFINITY)))
}

/// Bytes of address space this process may still map under its soft limit, if it has
/// one: /proc/self/limits' "Max address space" (in bytes) less /proc/self/status'
/// VmSize.
fn address_space_left() -> Option<f64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let limit: f64 = limits
        .lines()
        .find_map(|line| line.strip_prefix("Max address space"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let mapped = kilobytes(&status, "VmSize:")? * 1024.0;
    Some((limit - mapped).max(0.0))
}

/// The value of a `/proc` line `<key> <n> kB`, in kilobytes.
fn kilobytes(text: &str, key: &str) -> Option<f64> {
    let value = text.lines().find_map(|line| line.strip_prefix(key))?;
    value.trim().trim_end_matches("kB").trim().parse().ok()
}
