//! Every long-lived thread of a run is started here: named, its error or panic kept
//! as a typed [`Error`] naming it (the first one wins, and it stops the run), and
//! joined here at the end. Workers, agents, predictors, trainers, the test agent and,
//! in a run across machines, the sync thread run under it; the monitor runs on the
//! main thread, which waits for them. Short jobs done side by side (the environments
//! made at the start) run on scoped threads here too.

use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

use crate::config::EnvConfig;
use crate::env::Env;
use crate::error::{Error, Result};
use crate::stop::{Stop, StopReason};

/// Makes the environments of `ranks` side by side, each on a thread of its own that
/// ends before this returns, twice as many at a time as there are cores: an
/// environment from outside a3g starts a Python that spends most of a second importing,
/// so many agents start in the time the cores take for their shares rather than for
/// all of them in a row, and no start waits behind so many others that it times out.
pub fn make_envs(env: &EnvConfig, ranks: &[usize]) -> Result<Vec<Box<dyn Env>>> {
    let at_once = std::thread::available_parallelism().map_or(2, |cores| 2 * cores.get());
    let mut envs = Vec::with_capacity(ranks.len());
    for chunk in ranks.chunks(at_once) {
        std::thread::scope(|scope| -> Result<()> {
            let makers = chunk
                .iter()
                .map(|&rank| {
                    let name = format!("env maker {rank}");
                    std::thread::Builder::new()
                        .name(name.clone())
                        .spawn_scoped(scope, move || env.make(rank))
                        .map_err(|cause| Error::Io {
                            action: "start a thread for",
                            path: std::path::PathBuf::from(name),
                            cause,
                        })
                })
                .collect::<Result<Vec<_>>>()?;
            for maker in makers {
                envs.push(maker.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))?);
            }
            Ok(())
        })?;
    }
    Ok(envs)
}

/// Starts, watches and joins a run's threads.
#[derive(Clone)]
pub struct Supervisor {
    stop: Stop,
    /// The first failure of any thread, kept for the run's result.
    failure: Arc<Mutex<Option<Error>>>,
}

impl Supervisor {
    /// A supervisor whose threads' failures request `stop`.
    pub fn new(stop: Stop) -> Self {
        Supervisor { stop, failure: Arc::default() }
    }

    /// The stop every thread polls.
    pub fn stop(&self) -> &Stop {
        &self.stop
    }

    /// Starts a thread named `name` running `body`. An error or panic of `body` is
    /// kept (if it is the first) and stops the run: a thread that died quietly would
    /// leave the run going one thread short until its budget ran out.
    pub fn spawn(
        &self,
        name: impl Into<String>,
        body: impl FnOnce() -> Result<()> + Send + 'static,
    ) -> Result<JoinHandle<()>> {
        let name = name.into();
        let supervisor = self.clone();
        let thread_name = name.clone();
        std::thread::Builder::new()
            .name(name.clone())
            .spawn(move || {
                let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body));
                let error = match outcome {
                    Ok(Ok(())) => return,
                    // Named already, by a thread that runs others' work (an A3C
                    // training thread names the worker whose rollout failed).
                    Ok(Err(named @ Error::Thread { .. })) => named,
                    Ok(Err(cause)) => Error::Thread { thread: thread_name, cause: Box::new(cause) },
                    Err(payload) => {
                        Error::Panic { thread: thread_name, message: panic_message(&*payload) }
                    }
                };
                supervisor.fail(error);
            })
            .map_err(|cause| Error::Io {
                action: "start a thread for",
                path: std::path::PathBuf::from(name),
                cause,
            })
    }

    /// Records `error` as the run's failure if none came first, and stops the run.
    pub fn fail(&self, error: Error) {
        let summary = error.report();
        self.failure.lock().unwrap_or_else(PoisonError::into_inner).get_or_insert(error);
        self.stop.request(StopReason::Failure(summary));
    }

    /// Waits for `threads`, once a stop has been requested; returns the first failure
    /// of any thread, if one failed.
    pub fn join(&self, threads: impl IntoIterator<Item = JoinHandle<()>>) -> Option<Error> {
        for handle in threads {
            // The thread's own wrapper catches panics, so joining cannot fail.
            let _ = handle.join();
        }
        self.failure.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
}

/// The text a panic was raised with.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|text| text.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A thread's error comes back typed and named, the first of several wins, a
    /// panic is named as one, and either stops the run.
    #[test]
    fn failures_are_kept_typed_and_named() {
        let supervisor = Supervisor::new(Stop::default());
        let fine = supervisor.spawn("fine", || Ok(())).unwrap();
        assert!(supervisor.join([fine]).is_none());
        assert!(!supervisor.stop().requested());

        let failing = supervisor
            .spawn("test agent", || Err(Error::BadArguments("no screen".into())))
            .unwrap();
        failing.join().unwrap();
        let panicking = supervisor.spawn("predictor 0", || panic!("a broken invariant")).unwrap();
        let failure = supervisor.join([panicking]);
        assert!(supervisor.stop().requested());
        match failure {
            Some(Error::Thread { thread, cause }) => {
                assert_eq!(thread, "test agent");
                assert!(matches!(*cause, Error::BadArguments(_)));
            }
            other => panic!("{other:?}"),
        }

        let supervisor = Supervisor::new(Stop::default());
        let panicking = supervisor.spawn("predictor 0", || panic!("a broken invariant")).unwrap();
        let failure = supervisor.join([panicking]).expect("the panic");
        assert!(failure.report().starts_with("predictor 0 panicked (a broken invariant)"));
    }
}
