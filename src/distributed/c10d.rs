//! The process group of a run across machines: c10d's TCPStore and ProcessGroupGloo,
//! and for ranks with GPUs its ProcessGroupNCCL, reached through the C functions of
//! c10d_shim.cpp. The shim is built when set-up found gloo's headers
//! (`cfg(a3g_c10d)`), with NCCL when it found CUDA's too (`cfg(a3g_nccl)`); without
//! it, joining a group is refused on one line and a3g runs on one machine as before.

use std::time::Duration;

use super::Launch;
use crate::error::{Error, Result};

/// Whether this build can train across machines.
pub const BUILT_IN: bool = cfg!(a3g_c10d);

/// Whether this build's ranks with GPUs sum the model through NCCL.
pub const NCCL_BUILT_IN: bool = cfg!(a3g_nccl);

/// CUDA device `gpu`'s UUID as two numbers to gather, naming the GPU itself whatever
/// devices this process is shown; `None` where this build or CUDA cannot say.
pub fn gpu_uuid(gpu: usize) -> Option<[i64; 2]> {
    #[cfg(a3g_c10d)]
    {
        let mut uuid = [0u8; 16];
        // SAFETY: `uuid` has the 16 bytes the shim writes.
        let known = unsafe { ffi::a3g_cuda_uuid(gpu as i32, uuid.as_mut_ptr()) } == 1;
        let half = |bytes: &[u8]| i64::from_le_bytes(bytes.try_into().expect("8 bytes"));
        known.then(|| [half(&uuid[..8]), half(&uuid[8..])])
    }
    #[cfg(not(a3g_c10d))]
    {
        let _ = gpu;
        None
    }
}

/// What a peer that is gone or late comes to, for the user.
#[cfg(a3g_c10d)]
const PEER_ADVICE: &str =
    "check that every rank runs, that MASTER_ADDR and MASTER_PORT reach rank 0, \
                           and that --sync-timeout is long enough";

#[cfg(a3g_c10d)]
mod ffi {
    use std::ffi::{c_char, c_int, c_void};

    extern "C" {
        #[allow(clippy::too_many_arguments)]
        pub fn a3g_c10d_join(
            host: *const c_char,
            port: u16,
            rank: c_int,
            world_size: c_int,
            serve_store: c_int,
            timeout_ms: i64,
            bind_host: *const c_char,
            phase: *mut i32,
            error: *mut c_char,
            capacity: usize,
        ) -> *mut c_void;
        pub fn a3g_c10d_leave(group: *mut c_void);
        pub fn a3g_cuda_uuid(device: c_int, uuid: *mut u8) -> c_int;
        pub fn a3g_c10d_restore_stderr();
        pub fn a3g_c10d_sum_on_gpu(
            group: *mut c_void,
            device: c_int,
            timeout_ms: i64,
            error: *mut c_char,
            capacity: usize,
        ) -> c_int;
        pub fn a3g_c10d_all_reduce_sum(
            group: *mut c_void,
            values: *mut f32,
            length: i64,
            error: *mut c_char,
            capacity: usize,
        ) -> c_int;
        pub fn a3g_c10d_broadcast(
            group: *mut c_void,
            bytes: *mut u8,
            length: i64,
            root: c_int,
            error: *mut c_char,
            capacity: usize,
        ) -> c_int;
        pub fn a3g_c10d_all_gather(
            group: *mut c_void,
            values: *const i64,
            count: usize,
            gathered: *mut i64,
            error: *mut c_char,
            capacity: usize,
        ) -> c_int;
    }
}

/// The shim's group, or, in a build without it, a type with no values.
#[cfg(a3g_c10d)]
struct Raw(*mut std::ffi::c_void);
#[cfg(not(a3g_c10d))]
enum Raw {}

/// This rank's membership of the run's process group; leaves it when dropped.
pub struct Group {
    raw: Raw,
    pub rank: usize,
    pub world_size: usize,
}

// The shim's group is used by one thread at a time (every call takes `&mut self`),
// and c10d's objects may move between threads.
unsafe impl Send for Group {}

/// Room for c10d's reason, which the shim cuts to its first line.
#[cfg(a3g_c10d)]
const ERROR_CAPACITY: usize = 1024;

impl Group {
    /// Joins the other ranks of `launch`, waiting up to `timeout` for all of them;
    /// the same timeout bounds every exchange after. A join that has not finished
    /// when the timeout has passed fails, whatever c10d is waiting on (some of its
    /// waits have no deadline): its thread is left blocked, and ends with the process,
    /// which this error ends.
    pub fn join(launch: &Launch, timeout: Duration) -> Result<Self> {
        #[cfg(a3g_c10d)]
        {
            use std::sync::atomic::{AtomicI32, Ordering};
            use std::sync::Arc;

            let failed = |reason: String, advice: &'static str| Error::Peers {
                rank: launch.rank,
                world_size: launch.world_size,
                action: "join the other ranks",
                reason,
                advice,
            };
            let host = std::ffi::CString::new(launch.store_host.as_str())
                .map_err(|_| failed("MASTER_ADDR holds a NUL byte".into(), PEER_ADVICE))?;
            let bind = std::ffi::CString::new(launch.bind_host().unwrap_or("")).unwrap_or_default();
            let phase = Arc::new(AtomicI32::new(PHASE_REACHING_STORE));
            let (joined_tx, joined) = crossbeam::channel::bounded(1);
            let (thread_launch, thread_phase) = (launch.clone(), phase.clone());
            // Not under the supervisor, which starts with the run: this thread may never
            // return, and nothing waits for it past the timeout.
            std::thread::Builder::new()
                .name("c10d join".into())
                .spawn(move || {
                    let mut error = vec![0 as std::ffi::c_char; ERROR_CAPACITY];
                    // SAFETY: the strings are NUL-terminated and `phase` is an i32 the
                    // thread holds alive; `error` has the capacity passed.
                    let raw = unsafe {
                        ffi::a3g_c10d_join(
                            host.as_ptr(),
                            thread_launch.store_port,
                            thread_launch.rank as i32,
                            thread_launch.world_size as i32,
                            thread_launch.serves_store as i32,
                            millis(timeout),
                            bind.as_ptr(),
                            thread_phase.as_ptr(),
                            error.as_mut_ptr(),
                            error.len(),
                        )
                    };
                    let result = if raw.is_null() {
                        Err(message(&error))
                    } else {
                        Ok(Group {
                            raw: Raw(raw),
                            rank: thread_launch.rank,
                            world_size: thread_launch.world_size,
                        })
                    };
                    // Past the timeout nobody listens, and a late group is left here.
                    let _ = joined_tx.send(result);
                })
                .map_err(|err| failed(format!("no thread to join in: {err}"), PEER_ADVICE))?;
            match joined.recv_timeout(timeout) {
                Ok(Ok(group)) => Ok(group),
                // c10d's own wait ran out as ours did: the same unfinished join, told
                // the same way rather than in c10d's words.
                Ok(Err(reason)) if reason.starts_with("wait timeout") => {
                    let (reason, advice) =
                        unfinished_join(launch, timeout, phase.load(Ordering::Acquire));
                    Err(failed(reason, advice))
                }
                // Rank 0, which serves the store, gave up on the world (or stopped)
                // while this rank waited in it: its store closed under this rank.
                Ok(Err(reason))
                    if reason.starts_with("Failed to recv")
                        && phase.load(Ordering::Acquire) == PHASE_MEETING_RANKS =>
                {
                    let address = format!("{}:{}", launch.store_host, launch.store_port);
                    Err(failed(
                        format!(
                            "the store at {address} closed before all {} ranks joined: rank 0, which serves \
                             it, stopped or gave up on them after its --sync-timeout",
                            launch.world_size
                        ),
                        "start every rank with the same WORLD_SIZE, MASTER_ADDR and MASTER_PORT, and see \
                         rank 0's own error",
                    ))
                }
                Ok(Err(reason)) => Err(failed(reason, PEER_ADVICE)),
                Err(_) => {
                    // SAFETY: the shim's own bookkeeping, safe from any thread.
                    unsafe { ffi::a3g_c10d_restore_stderr() };
                    let (reason, advice) =
                        unfinished_join(launch, timeout, phase.load(Ordering::Acquire));
                    Err(failed(reason, advice))
                }
            }
        }
        #[cfg(not(a3g_c10d))]
        {
            let _ = timeout;
            Err(Error::BadArguments(format!(
                "a launcher started this a3g as rank {} of {}, but it was built without training across \
                 machines (set-up found no gloo headers: Debian's libgloo-dev); see docs/distributed.md, or \
                 run it without the launcher's variables",
                launch.rank, launch.world_size
            )))
        }
    }

    /// From now on sums the model through NCCL on CUDA device `gpu` (each rank its
    /// own), with the same timeout as Gloo's; the small exchanges stay on Gloo. Every
    /// rank calls it, or none: the ranks' settings say which before (shared_settings).
    pub fn sum_on_gpu(&mut self, gpu: usize, timeout: Duration) -> Result<()> {
        #[cfg(a3g_c10d)]
        // SAFETY: the group is live; `error` has the capacity passed.
        return self.call("sum the model through NCCL", |group, error, capacity| unsafe {
            ffi::a3g_c10d_sum_on_gpu(group, gpu as i32, millis(timeout), error, capacity)
        });
        #[cfg(not(a3g_c10d))]
        {
            let _ = (gpu, timeout);
            match self.raw {}
        }
    }

    /// Sums `values` over the ranks, in place: on this rank's GPU after `sum_on_gpu`,
    /// else through Gloo on the CPU.
    pub fn all_reduce_sum(&mut self, values: &mut [f32]) -> Result<()> {
        #[cfg(a3g_c10d)]
        // SAFETY: `values` is a live, exclusive buffer of the length passed.
        return self.call("sum the ranks' changes", |group, error, capacity| unsafe {
            let length = values.len() as i64;
            ffi::a3g_c10d_all_reduce_sum(group, values.as_mut_ptr(), length, error, capacity)
        });
        #[cfg(not(a3g_c10d))]
        {
            let _ = values;
            match self.raw {}
        }
    }

    /// Gives every rank the `bytes` of rank `root`, in place.
    pub fn broadcast(&mut self, bytes: &mut [u8], root: usize) -> Result<()> {
        #[cfg(a3g_c10d)]
        // SAFETY: `bytes` is a live, exclusive buffer of the length passed.
        return self.call("share a rank's data", |group, error, capacity| unsafe {
            let (length, root) = (bytes.len() as i64, root as i32);
            ffi::a3g_c10d_broadcast(group, bytes.as_mut_ptr(), length, root, error, capacity)
        });
        #[cfg(not(a3g_c10d))]
        {
            let _ = (bytes, root);
            match self.raw {}
        }
    }

    /// Every rank's `value`, by rank.
    pub fn all_gather(&mut self, value: i64) -> Result<Vec<i64>> {
        Ok(self.all_gather_many(&[value])?.into_iter().map(|values| values[0]).collect())
    }

    /// Every rank's `values` (the same count on each), by rank, in one round trip.
    pub fn all_gather_many(&mut self, values: &[i64]) -> Result<Vec<Vec<i64>>> {
        #[cfg(a3g_c10d)]
        {
            let count = values.len();
            let mut gathered = vec![0i64; self.world_size * count];
            // SAFETY: `values` holds `count` values and `gathered` room for `count` per
            // rank, as the shim reads and writes.
            self.call("gather the ranks' values", |group, error, capacity| unsafe {
                ffi::a3g_c10d_all_gather(
                    group,
                    values.as_ptr(),
                    count,
                    gathered.as_mut_ptr(),
                    error,
                    capacity,
                )
            })?;
            Ok(gathered.chunks(count.max(1)).map(<[i64]>::to_vec).collect())
        }
        #[cfg(not(a3g_c10d))]
        {
            let _ = values;
            match self.raw {}
        }
    }

    /// Runs one of the shim's collectives, `exchange`, with room for its error, which
    /// becomes this rank's one-line failure to `action`.
    #[cfg(a3g_c10d)]
    fn call(
        &mut self,
        action: &'static str,
        exchange: impl FnOnce(*mut std::ffi::c_void, *mut std::ffi::c_char, usize) -> i32,
    ) -> Result<()> {
        let mut error = vec![0 as std::ffi::c_char; ERROR_CAPACITY];
        if exchange(self.raw.0, error.as_mut_ptr(), error.len()) == 0 {
            return Ok(());
        }
        Err(Error::Peers {
            rank: self.rank,
            world_size: self.world_size,
            action,
            reason: message(&error),
            advice: PEER_ADVICE,
        })
    }
}

#[cfg(a3g_c10d)]
impl Drop for Group {
    fn drop(&mut self) {
        // SAFETY: the group came from a3g_c10d_join and is left once.
        unsafe { ffi::a3g_c10d_leave(self.raw.0) }
    }
}

/// The shim's phases of a join (JoinPhase in c10d_shim.cpp): reaching rank 0's store,
/// then meeting the other ranks through it.
#[cfg(a3g_c10d)]
const PHASE_REACHING_STORE: i32 = 0;
#[cfg(a3g_c10d)]
const PHASE_MEETING_RANKS: i32 = 1;

/// Why a join that was still under way at its timeout failed, and what to do, by the
/// phase it was in. A store that never answered is told apart by a connection tried
/// now: nothing listening (rank 0 not started, or another address), or a listener
/// that is not rank 0's store (a mistyped port held by another service).
#[cfg(a3g_c10d)]
fn unfinished_join(launch: &Launch, timeout: Duration, phase: i32) -> (String, &'static str) {
    let address = format!("{}:{}", launch.store_host, launch.store_port);
    let seconds = timeout.as_secs_f64();
    if phase == PHASE_MEETING_RANKS {
        return (
            format!(
                "the store at {address} answered, but not all {} ranks joined within {seconds} s",
                launch.world_size
            ),
            "start every rank with the same WORLD_SIZE, MASTER_ADDR and MASTER_PORT, or raise --sync-timeout",
        );
    }
    if launch.serves_store {
        return (
            format!("the store this rank serves at {address} did not start within {seconds} s"),
            "check that MASTER_ADDR is an address of this machine and that MASTER_PORT is free",
        );
    }
    if launch.rank == 0 {
        return (
            format!(
                "no store listened at {address} within {seconds} s, and TORCHELASTIC_USE_AGENT_STORE=True \
                 says a torchrun agent serves it"
            ),
            "start the ranks with torchrun, or unset TORCHELASTIC_USE_AGENT_STORE so that rank 0 serves \
             the store",
        );
    }
    let Some(socket) =
        std::net::ToSocketAddrs::to_socket_addrs(&(launch.store_host.as_str(), launch.store_port))
            .ok()
            .and_then(|mut addresses| addresses.next())
    else {
        return (
            format!("MASTER_ADDR {} does not resolve to an address", launch.store_host),
            "set MASTER_ADDR to rank 0's host name or IP address",
        );
    };
    if std::net::TcpStream::connect_timeout(&socket, Duration::from_secs(1)).is_ok() {
        (
            format!(
                "something listens at {address} but did not answer as rank 0's c10d store within \
                 {seconds} s"
            ),
            "check that MASTER_PORT is the port rank 0 serves (another service may hold this one), \
             or, if rank 0 started only just now, raise --sync-timeout",
        )
    } else {
        (
            format!("no store listened at {address} within {seconds} s"),
            "start rank 0, and check that MASTER_ADDR and MASTER_PORT name its address and port",
        )
    }
}

/// `timeout` as the shim takes it: whole milliseconds, saturating.
#[cfg(a3g_c10d)]
fn millis(timeout: Duration) -> i64 {
    i64::try_from(timeout.as_millis()).unwrap_or(i64::MAX)
}

/// The NUL-terminated message the shim wrote into `error`.
#[cfg(a3g_c10d)]
fn message(error: &[std::ffi::c_char]) -> String {
    let bytes: Vec<u8> = error.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    without_source_location(&String::from_utf8_lossy(&bytes)).to_string()
}

/// `text` without the `[path/to/file.cc:123] ` that Gloo and c10d put before their
/// messages (and c10d's `[c10d] ` after it): where in their sources it was raised is
/// no use to the user reading it.
#[cfg(any(a3g_c10d, test))]
fn without_source_location(text: &str) -> &str {
    let located =
        text.strip_prefix('[').and_then(|rest| rest.split_once("] ")).filter(|(place, _)| {
            place.rsplit_once(':').is_some_and(|(file, line)| {
                file.contains('.') && !line.is_empty() && line.bytes().all(|b| b.is_ascii_digit())
            })
        });
    match located {
        Some((_, message)) => message.strip_prefix("[c10d] ").unwrap_or(message),
        None => text,
    }
}

#[cfg(all(test, a3g_c10d))]
mod tests {
    use std::net::TcpListener;

    use super::*;

    /// A port free on 127.0.0.1 a moment ago.
    fn free_port() -> u16 {
        TcpListener::bind("127.0.0.1:0").and_then(|listener| listener.local_addr()).unwrap().port()
    }

    /// Two ranks on 127.0.0.1 join, sum a vector, take rank 0's bytes and gather a
    /// value each, then three each, through c10d's store and Gloo.
    #[test]
    fn two_ranks_reduce_broadcast_and_gather_on_loopback() {
        let port = free_port();
        let ranks: Vec<_> = (0..2)
            .map(|rank| {
                std::thread::spawn(move || {
                    let mut group =
                        Group::join(&Launch::loopback(rank, 2, port), Duration::from_secs(20))?;
                    let mut values = vec![rank as f32 + 1.0, 10.0 * rank as f32];
                    group.all_reduce_sum(&mut values)?;
                    let mut bytes = if rank == 0 { b"model".to_vec() } else { vec![0; 5] };
                    group.broadcast(&mut bytes, 0)?;
                    let gathered = group.all_gather(100 + rank as i64)?;
                    let many = group.all_gather_many(&[rank as i64, -7, 1 << 40])?;
                    Ok::<_, Error>((values, bytes, gathered, many))
                })
            })
            .collect();
        for rank in ranks {
            let (values, bytes, gathered, many) = rank.join().unwrap().expect("the exchange");
            assert_eq!(values, vec![3.0, 10.0]);
            assert_eq!(bytes, b"model");
            assert_eq!(gathered, vec![100, 101]);
            assert_eq!(many, vec![vec![0, -7, 1 << 40], vec![1, -7, 1 << 40]]);
        }
    }

    /// A rank whose peer never comes gives up after its timeout with one line
    /// naming itself, not a hang or an abort.
    #[test]
    fn a_missing_peer_is_an_error_within_the_timeout() {
        let started = std::time::Instant::now();
        let error = match Group::join(&Launch::loopback(0, 2, free_port()), Duration::from_secs(2))
        {
            Ok(_) => panic!("joined a group of two alone"),
            Err(error) => error.to_string(),
        };
        assert!(error.starts_with("rank 0 of 2: could not join the other ranks"), "{error}");
        assert!(!error.contains('\n'), "{error}");
        assert!(started.elapsed() < Duration::from_secs(15), "{:?}", started.elapsed());
    }
}

#[cfg(test)]
mod message_tests {
    use super::without_source_location;

    /// Gloo's source path goes; a message that only starts with a bracket stays whole.
    #[test]
    fn source_locations_are_cut_from_messages() {
        assert_eq!(
            without_source_location(
                "[../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [127.0.0.1]:4040"
            ),
            "Connection closed by peer [127.0.0.1]:4040"
        );
        assert_eq!(
            without_source_location("[socket.cpp:1019] [c10d] The client socket has timed out"),
            "The client socket has timed out"
        );
        for whole in ["[rank 1] did not answer", "[a.cc:] x", "no bracket", "[x.cc:12]no space"] {
            assert_eq!(without_source_location(whole), whole);
        }
    }
}
