//! Training across machines on c10d, the C++ core of torch.distributed: where a rank
//! learns its place in the world (the launchers' environment variables), the process
//! group that reduces tensors between ranks ([`c10d`]), and the arithmetic of a sync
//! that keeps the Hogwild updates made while it ran ([`sync`]).

pub mod c10d;
pub mod rank;
pub mod sync;

pub use sync::SyncMerge;

use std::time::Duration;

use tch::Device;

use crate::error::{Error, Result};

/// What `a3g devices` says of training across machines in this build.
pub fn built_in_line() -> &'static str {
    if c10d::NCCL_BUILT_IN {
        "training across machines: built in (c10d with Gloo, and NCCL for ranks with --gpu-ids; \
         docs/distributed.md)"
    } else if c10d::BUILT_IN {
        "training across machines: built in (c10d with Gloo; ranks with --gpu-ids sum through Gloo too, \
         as set-up found no CUDA headers for NCCL; docs/distributed.md)"
    } else {
        "training across machines: not built in (set-up found no gloo headers, Debian's libgloo-dev; \
         docs/distributed.md)"
    }
}

/// The port torch.distributed's launchers use when MASTER_PORT is not set.
pub const DEFAULT_PORT: u16 = 29500;

/// How long the ranks train between two syncs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SyncInterval {
    /// --sync-interval, as given.
    Given(Duration),
    /// The default: `shortest`, or 20 times the processor time the costliest rank's
    /// last sync took its sync thread when that is longer, so that the syncs' own work
    /// (reading the model, the change since the last agreement, the digest, adding the
    /// merged change) stays near 5% of a core; Gloo's threads, which do the
    /// all-reduce's sums and its sockets' work, are not counted, so the syncs take
    /// somewhat more. Wall time would not do: a sync spends most of it waiting for the
    /// other ranks and the link, beside training threads that go on meanwhile, and on
    /// a busy machine for the cores.
    Default { shortest: Duration },
}

/// The default interval's multiple of the processor time a sync took.
const INTERVAL_PER_SYNC: u32 = 20;

impl SyncInterval {
    /// --sync-interval if given, else the default at `world_size` ranks. Between two
    /// syncs every rank trains a copy of the model of its own, and a sync adds up
    /// changes each made on a copy that had not seen the others': the more ranks, the
    /// further apart the copies drift in the same time. On CartPole a sync every
    /// second took 1.48x one process's agent steps at two ranks (and two ranks learned
    /// Pong as fast as one process), but 6.2x at four and more than 11x at eight,
    /// where a sync every 0.2 s took 2.3x and over 3.7x (one run of six at eight ranks
    /// never reaching the goal) and every 0.05 s 1.8x and 3.2x, every run reaching it
    /// (docs/distributed.md, "At N ranks").
    pub fn new(given: Option<f64>, world_size: usize) -> Self {
        match given {
            Some(seconds) => SyncInterval::Given(Duration::from_secs_f64(seconds)),
            None if world_size <= 2 => SyncInterval::Default { shortest: Duration::from_secs(1) },
            None => SyncInterval::Default { shortest: Duration::from_millis(50) },
        }
    }

    /// The least time between two syncs.
    pub fn shortest(self) -> Duration {
        match self {
            SyncInterval::Given(interval) | SyncInterval::Default { shortest: interval } => {
                interval
            }
        }
    }

    /// The time to the next sync, after one that took `sync_cpu` of processor time on
    /// the rank where it took most; a default never beyond `longest`.
    pub fn next(self, sync_cpu: Duration, longest: Duration) -> Duration {
        match self {
            SyncInterval::Given(interval) => interval,
            SyncInterval::Default { shortest } => {
                shortest.max((sync_cpu * INTERVAL_PER_SYNC).min(longest))
            }
        }
    }

    /// How the ranks' settings check writes it.
    pub fn setting(self) -> serde_json::Value {
        match self {
            SyncInterval::Given(interval) => serde_json::json!(interval.as_secs_f64()),
            SyncInterval::Default { shortest } => serde_json::json!(format!(
                "the default ({} s, longer where a sync takes more CPU)",
                shortest.as_secs_f64()
            )),
        }
    }
}

/// One rank's place in a multi-process run, as a launcher described it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Launch {
    pub rank: usize,
    pub world_size: usize,
    /// Where the rendezvous store listens (MASTER_ADDR, MASTER_PORT).
    pub store_host: String,
    pub store_port: u16,
    /// Whether this rank serves the store: rank 0, unless torchrun's agent already
    /// does (TORCHELASTIC_USE_AGENT_STORE=True), where a second server would fail.
    pub serves_store: bool,
    /// This rank's place among the ranks of its machine (LOCAL_RANK, SLURM_LOCALID or
    /// OMPI_COMM_WORLD_LOCAL_RANK; 0 when none is set), which picks its GPU for NCCL.
    pub local_rank: usize,
}

/// A launcher's variable as this process has it; one set to nothing counts as unset,
/// as a shell's `RANK= a3g ...` means.
pub fn process_variable(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|value| !value.is_empty())
}

impl Launch {
    /// Rank `rank` of `world_size` on this machine, rank 0 serving the store on
    /// 127.0.0.1:`port`: the world that tests and benchmarks make in one process.
    pub fn loopback(rank: usize, world_size: usize, port: u16) -> Launch {
        Launch {
            rank,
            world_size,
            store_host: "127.0.0.1".into(),
            store_port: port,
            serves_store: rank == 0,
            local_rank: 0,
        }
    }

    /// Reads the variables a launcher sets: torchrun's (RANK, WORLD_SIZE), then
    /// Slurm's (SLURM_PROCID, SLURM_NTASKS), then Open MPI's (OMPI_COMM_WORLD_RANK,
    /// OMPI_COMM_WORLD_SIZE), each with MASTER_ADDR, and MASTER_PORT defaulting to
    /// 29500. `None` when no launcher started this process, or when MASTER_ADDR is not
    /// set (a batch script's own variables, say): it runs as one machine.
    pub fn from_env(var: impl Fn(&str) -> Option<String>) -> Result<Option<Self>> {
        let Some((rank_name, size_name)) = launcher_variables(&var) else {
            return Ok(None);
        };
        let Some(store_host) = master_addr(&var) else {
            return Ok(None);
        };
        let number = |name: &str| -> Result<usize> {
            let text = var(name).unwrap_or_default();
            text.trim().parse().map_err(|_| {
                Error::BadArguments(format!(
                    "the launcher's {name} is {text:?}, not a whole number; launch a3g with torchrun, srun or \
                     mpirun, or unset {name}"
                ))
            })
        };
        let (rank, world_size) = (number(rank_name)?, number(size_name)?);
        // c10d and Gloo number ranks with C ints: a larger size would wrap around.
        if world_size > i32::MAX as usize {
            return Err(Error::BadArguments(format!(
                "the launcher gave {size_name}={world_size}, beyond the {} ranks c10d can number; set the \
                 number of ranks the run has",
                i32::MAX
            )));
        }
        if world_size == 0 || rank >= world_size {
            return Err(Error::BadArguments(format!(
                "the launcher gave {rank_name}={rank} with {size_name}={world_size}; a rank must be below the \
                 world size"
            )));
        }
        let store_port = match var("MASTER_PORT") {
            None => DEFAULT_PORT,
            Some(text) => text.trim().parse().ok().filter(|&port| port > 0).ok_or_else(|| {
                Error::BadArguments(format!(
                    "MASTER_PORT is {text:?}, not a port number (1 to 65535); set it to the port rank 0's \
                     store listens on"
                ))
            })?,
        };
        let agent_serves = var("TORCHELASTIC_USE_AGENT_STORE").is_some_and(|value| value == "True");
        let local_rank = match ["LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK"]
            .into_iter()
            .find(|name| var(name).is_some())
        {
            Some(name) => number(name)?,
            None => 0,
        };
        Ok(Some(Launch {
            rank,
            world_size,
            store_host: checked_host(&store_host)?,
            store_port,
            serves_store: rank == 0 && !agent_serves,
            local_rank,
        }))
    }

    /// This process's place in a run across machines, from its environment: `None` for
    /// a run on one machine, a world of one rank included (it needs no engine).
    pub fn of_this_process() -> Result<Option<Self>> {
        Ok(Self::from_env(process_variable)?.filter(|launch| launch.world_size > 1))
    }

    /// What to tell a user whose environment names a rank but not all a launch needs
    /// (MASTER_ADDR, or one of a launcher's pair of variables), which runs on one
    /// machine: that it does, and how to train across machines instead.
    pub fn ignored(var: impl Fn(&str) -> Option<String>) -> Option<String> {
        let Some((rank_name, size_name)) = launcher_variables(&var) else {
            let (set, unset) = LAUNCHER_PAIRS.into_iter().find_map(|(rank, size)| {
                match (var(rank).is_some(), var(size).is_some()) {
                    (true, false) => Some((rank, size)),
                    (false, true) => Some((size, rank)),
                    _ => None,
                }
            })?;
            return master_addr(&var).is_some().then(|| {
                format!(
                    "note: {set} and MASTER_ADDR are set but {unset} is not, so this run trains on this \
                     machine alone; set {unset} too (launchers such as torchrun set both) to train across \
                     machines"
                )
            });
        };
        master_addr(&var).is_none().then(|| {
            format!(
                "note: {rank_name} and {size_name} are set but MASTER_ADDR is not, so this run trains on this \
                 machine alone; set MASTER_ADDR (and MASTER_PORT) to rank 0's address to train across machines"
            )
        })
    }

    /// The address Gloo's connections bind to: the loopback one when the store is on
    /// this machine's loopback, so that such a run never leaves the machine; else
    /// `None`, for the address this machine's hostname resolves to.
    pub fn bind_host(&self) -> Option<&'static str> {
        match self.store_host.as_str() {
            "127.0.0.1" | "localhost" => Some("127.0.0.1"),
            "::1" => Some("::1"),
            _ => None,
        }
    }
}

/// Rank 0's address, when MASTER_ADDR is set and not blank.
fn master_addr(var: &impl Fn(&str) -> Option<String>) -> Option<String> {
    var("MASTER_ADDR").filter(|host| !host.trim().is_empty())
}

/// The launchers' rank and world-size variables: torchrun's, Slurm's, Open MPI's.
const LAUNCHER_PAIRS: [(&str, &str); 3] = [
    ("RANK", "WORLD_SIZE"),
    ("SLURM_PROCID", "SLURM_NTASKS"),
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
];

/// The rank and world-size variables of the first launcher whose pair is set.
fn launcher_variables(
    var: &impl Fn(&str) -> Option<String>,
) -> Option<(&'static str, &'static str)> {
    LAUNCHER_PAIRS.into_iter().find(|(rank, size)| var(rank).is_some() && var(size).is_some())
}

/// MASTER_ADDR as a host c10d can connect to: trimmed, an IPv6 literal taken out of
/// its brackets; one with a port attached is refused, as c10d would look for a host
/// of that name until the timeout.
fn checked_host(text: &str) -> Result<String> {
    let host = text.trim();
    let unbracketed = host.strip_prefix('[').and_then(|rest| rest.strip_suffix(']'));
    if let Some(inner) = unbracketed.filter(|inner| inner.parse::<std::net::Ipv6Addr>().is_ok()) {
        return Ok(inner.to_string());
    }
    if host.contains(':') && host.parse::<std::net::Ipv6Addr>().is_err() {
        return Err(Error::BadArguments(format!(
            "MASTER_ADDR is {text:?}, which is not a host name or IP address (a port attached?); set \
             MASTER_ADDR to rank 0's host alone and its port in MASTER_PORT"
        )));
    }
    Ok(host.to_string())
}

/// Where a rank sums the ranks' changes to the model at each sync.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelSum {
    /// Through Gloo, on the CPU, where the shared model lives.
    Gloo,
    /// Through NCCL on this rank's GPU (its CUDA index): the changes go up to it and
    /// back, so that GPU nodes reduce over NCCL's links rather than Gloo's TCP.
    Nccl { gpu: usize },
}

impl ModelSum {
    /// When this build has NCCL (`nccl_built_in`) and the rank has GPUs, NCCL on the
    /// one its place on its machine picks (`local_rank`, round the list), so that the
    /// ranks of one machine, launched with the same --gpu-ids, take different GPUs as
    /// NCCL requires; Gloo otherwise.
    pub fn for_devices(devices: &[Device], local_rank: usize, nccl_built_in: bool) -> Self {
        if !nccl_built_in || devices.is_empty() {
            return ModelSum::Gloo;
        }
        match devices[local_rank % devices.len()] {
            Device::Cuda(gpu) => ModelSum::Nccl { gpu },
            _ => ModelSum::Gloo,
        }
    }

    /// How the ranks' settings name it: every rank must sum the same way.
    pub fn name(self) -> &'static str {
        match self {
            ModelSum::Gloo => "Gloo on the CPU",
            ModelSum::Nccl { .. } => "NCCL on a GPU",
        }
    }
}

/// How long a rank waits for its peers, at the rendezvous and at each reduction,
/// before it gives up on them.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    /// The default syncs every second at two ranks and every 0.05 s at more, and
    /// lengthens to 20 times a sync's processor time, up to the longest allowed; a
    /// given interval stays as given.
    #[test]
    fn the_default_interval_follows_the_world_and_the_cost_of_a_sync() {
        let (millis, longest) = (Duration::from_millis, Duration::from_secs(30));
        let two = SyncInterval::new(None, 2);
        let eight = SyncInterval::new(None, 8);
        assert_eq!(two.shortest(), millis(1000));
        assert_eq!(eight.shortest(), millis(50));
        assert_eq!(eight.next(millis(1), longest), millis(50));
        assert_eq!(eight.next(millis(5), longest), millis(100));
        assert_eq!(eight.next(millis(5000), longest), longest);
        assert_eq!(two.next(millis(20), longest), millis(1000));
        let given = SyncInterval::new(Some(0.2), 8);
        assert_eq!(given.next(millis(100), longest), millis(200));
    }

    fn launch(vars: &[(&str, &str)]) -> Result<Option<Launch>> {
        let vars: HashMap<String, String> =
            vars.iter().map(|(name, value)| (name.to_string(), value.to_string())).collect();
        Launch::from_env(|name| vars.get(name).cloned())
    }

    /// torchrun's, Slurm's and Open MPI's variables each give the rank and world
    /// size; MASTER_PORT defaults to 29500; rank 0 serves the store unless torchrun's
    /// agent does; no launcher means one machine.
    #[test]
    fn launchers_variables_give_the_rank() {
        assert_eq!(launch(&[]).unwrap(), None);
        let torchrun = launch(&[
            ("RANK", "1"),
            ("WORLD_SIZE", "2"),
            ("MASTER_ADDR", "127.0.0.1"),
            ("MASTER_PORT", "29400"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!((torchrun.rank, torchrun.world_size, torchrun.store_port), (1, 2, 29400));
        assert_eq!(torchrun.local_rank, 0);
        assert!(!torchrun.serves_store);
        assert_eq!(torchrun.bind_host(), Some("127.0.0.1"));
        let slurm = launch(&[
            ("SLURM_PROCID", "0"),
            ("SLURM_NTASKS", "4"),
            ("SLURM_LOCALID", "3"),
            ("MASTER_ADDR", "node001"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(slurm.local_rank, 3);
        assert_eq!((slurm.rank, slurm.world_size, slurm.store_port), (0, 4, DEFAULT_PORT));
        assert!(slurm.serves_store);
        assert_eq!(slurm.bind_host(), None);
        let mpi = launch(&[
            ("OMPI_COMM_WORLD_RANK", "2"),
            ("OMPI_COMM_WORLD_SIZE", "3"),
            ("MASTER_ADDR", "::1"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!((mpi.rank, mpi.world_size), (2, 3));
        assert_eq!(mpi.bind_host(), Some("::1"));
        let agent = launch(&[
            ("RANK", "0"),
            ("WORLD_SIZE", "2"),
            ("LOCAL_RANK", "1"),
            ("MASTER_ADDR", "localhost"),
            ("TORCHELASTIC_USE_AGENT_STORE", "True"),
        ])
        .unwrap()
        .unwrap();
        assert!(!agent.serves_store);
        assert_eq!(agent.local_rank, 1);
    }

    /// A launch that cannot work is one line naming the variable and what to set.
    #[test]
    fn broken_launches_name_the_variable() {
        let message = |vars: &[(&str, &str)]| launch(vars).unwrap_err().to_string();
        let rank_too_big = message(&[("RANK", "2"), ("WORLD_SIZE", "2"), ("MASTER_ADDR", "a")]);
        assert!(rank_too_big.contains("below the world size"), "{rank_too_big}");
        let not_a_number = message(&[("RANK", "one"), ("WORLD_SIZE", "2"), ("MASTER_ADDR", "a")]);
        assert!(not_a_number.contains("RANK is \"one\""), "{not_a_number}");
        let bad_port = message(&[
            ("RANK", "0"),
            ("WORLD_SIZE", "2"),
            ("MASTER_ADDR", "a"),
            ("MASTER_PORT", "70000"),
        ]);
        assert!(bad_port.contains("MASTER_PORT is \"70000\""), "{bad_port}");
        // c10d numbers ranks with C ints: 2^32 + 2 would wrap around to a world of 2.
        let wrapping =
            message(&[("RANK", "0"), ("WORLD_SIZE", "4294967298"), ("MASTER_ADDR", "a")]);
        assert!(wrapping.contains("WORLD_SIZE=4294967298, beyond"), "{wrapping}");
        let with_port =
            message(&[("RANK", "0"), ("WORLD_SIZE", "2"), ("MASTER_ADDR", "127.0.0.1:29644")]);
        assert!(
            with_port.contains("MASTER_ADDR is \"127.0.0.1:29644\"")
                && with_port.contains("MASTER_PORT"),
            "{with_port}"
        );
        for text in [rank_too_big, not_a_number, bad_port, wrapping, with_port] {
            assert!(!text.contains('\n'), "{text}");
        }
    }

    /// A rank sums through NCCL on the GPU its place on the machine picks when it has
    /// GPUs and the build has NCCL; on the CPU, or without NCCL, through Gloo.
    #[test]
    fn ranks_with_gpus_sum_through_nccl_when_built_with_it() {
        let gpus = [Device::Cuda(2), Device::Cuda(0)];
        assert_eq!(ModelSum::for_devices(&gpus, 0, true), ModelSum::Nccl { gpu: 2 });
        assert_eq!(ModelSum::for_devices(&gpus, 1, true), ModelSum::Nccl { gpu: 0 });
        assert_eq!(ModelSum::for_devices(&gpus, 2, true), ModelSum::Nccl { gpu: 2 });
        assert_eq!(ModelSum::for_devices(&gpus, 0, false), ModelSum::Gloo);
        assert_eq!(ModelSum::for_devices(&[Device::Cpu], 0, true), ModelSum::Gloo);
        assert_ne!(ModelSum::Gloo.name(), ModelSum::Nccl { gpu: 0 }.name());
    }

    /// A rank's variables without MASTER_ADDR (a Slurm batch script's own, say) leave
    /// the run on one machine, with a note saying so; with MASTER_ADDR, no note.
    #[test]
    fn a_rank_without_master_addr_runs_alone() {
        let slurm = [("SLURM_PROCID", "0"), ("SLURM_NTASKS", "4")];
        assert_eq!(launch(&slurm).unwrap(), None);
        let vars: HashMap<&str, &str> = slurm.into_iter().collect();
        let note =
            Launch::ignored(|name| vars.get(name).map(|value| value.to_string())).expect("a note");
        assert!(
            note.starts_with("note: SLURM_PROCID and SLURM_NTASKS are set but MASTER_ADDR"),
            "{note}"
        );
        let launched: HashMap<&str, &str> =
            [("RANK", "0"), ("WORLD_SIZE", "2"), ("MASTER_ADDR", "127.0.0.1")]
                .into_iter()
                .collect();
        assert_eq!(Launch::ignored(|name| launched.get(name).map(|value| value.to_string())), None);
        // Half of a launcher's pair with MASTER_ADDR is a launch gone wrong, said so.
        let half: HashMap<&str, &str> =
            [("RANK", "1"), ("MASTER_ADDR", "127.0.0.1")].into_iter().collect();
        assert_eq!(launch(&[("RANK", "1"), ("MASTER_ADDR", "127.0.0.1")]).unwrap(), None);
        let note =
            Launch::ignored(|name| half.get(name).map(|value| value.to_string())).expect("a note");
        assert!(
            note.starts_with("note: RANK and MASTER_ADDR are set but WORLD_SIZE is not"),
            "{note}"
        );
    }

    /// An IPv6 literal in brackets is taken out of them; hosts pass as they are.
    #[test]
    fn master_addr_takes_hosts_and_bracketed_ipv6() {
        let host = |addr: &str| {
            launch(&[("RANK", "0"), ("WORLD_SIZE", "2"), ("MASTER_ADDR", addr)])
                .unwrap()
                .unwrap()
                .store_host
        };
        assert_eq!(host("[::1]"), "::1");
        assert_eq!(host("::1"), "::1");
        assert_eq!(host(" node-3.cluster "), "node-3.cluster");
    }
}
