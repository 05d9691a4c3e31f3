//! A rank's part in a run across machines: the start, where every rank checks that
//! it trains what rank 0 trains and takes rank 0's weights, and the sync thread,
//! which every `--sync-interval` merges the ranks' changes to the model
//! (`--sync-merge`, [`super::sync`]),
//! sums their counters and carries a stop from any rank to all of them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::c10d::Group;
use super::sync::{SyncMerge, SyncPoint};
use super::SyncInterval;
use crate::checkpoint::Sidecar;
use crate::counters::TrainingCounters;
use crate::error::{Error, Result};
use crate::shared::SharedModel;
use crate::stop::{Stop, StopReason};

/// How many values each rank gives the gather at every sync (its stop code, three
/// counters, the agreed weights' digest, the last sync's CPU). Ranks compare it with
/// their settings, so that builds gathering different counts are refused by name
/// rather than failing inside Gloo.
pub const SYNC_GATHER: usize = 6;

/// What the other ranks had counted at the last sync, added to this rank's own counts
/// in status lines and checked against `--max-steps`; and, kept beside them for the
/// same status lines, this rank's syncs so far, the nanoseconds their merges of the
/// model took and the processor time the syncs took the sync thread.
#[derive(Debug, Default)]
pub struct PeerCounters {
    pub agent_steps: AtomicU64,
    pub env_frames: AtomicU64,
    pub updates: AtomicU64,
    pub syncs: AtomicU64,
    pub merge_nanos: AtomicU64,
    pub sync_cpu_nanos: AtomicU64,
}

/// Checks that every rank trains what rank 0 trains: `settings` is this rank's
/// description (a3g's version, the environment, the model and the trainer's
/// settings, as JSON). A rank that differs stops every rank, each with one line
/// naming the first setting that differs and the rank holding it.
pub fn agree_on_settings(group: &mut Group, settings: &serde_json::Value) -> Result<()> {
    let rank_zero = broadcast_bytes(group, settings.to_string().into_bytes(), 0)?;
    let rank_zero: serde_json::Value = serde_json::from_slice(&rank_zero).unwrap_or_default();
    let difference = first_difference(settings, &rank_zero);
    let agreed = group.all_gather(i64::from(difference.is_none()))?;
    let Some(differing_rank) = agreed.iter().position(|&agrees| agrees == 0) else {
        return Ok(());
    };
    // The first rank that differs says how, so that every rank reports the same line.
    let own = match &difference {
        Some((key, mine, theirs)) if group.rank == differing_rank => {
            format!("rank {differing_rank} has {key} {mine} and rank 0 has {theirs}")
        }
        _ => String::new(),
    };
    let how = broadcast_bytes(group, own.into_bytes(), differing_rank)?;
    Err(Error::BadArguments(format!(
        "rank {} of {}: {}; start every rank with the same a3g, --env and training flags",
        group.rank,
        group.world_size,
        String::from_utf8_lossy(&how)
    )))
}

/// Refuses, on every rank alike, two ranks that would sum through NCCL on one GPU:
/// NCCL takes a GPU per rank and says only "invalid usage" (seen with two ranks on
/// the one GPU of an H200 machine). `gpu` is this rank's CUDA index; GPUs are told
/// apart by their UUIDs, so containers and CUDA_VISIBLE_DEVICES do not mislead it.
/// Where a rank's CUDA cannot give its UUID the check is left to NCCL.
pub fn refuse_shared_gpu(group: &mut Group, gpu: usize) -> Result<()> {
    // All zeros for a rank that cannot tell: no UUID is all zeros.
    let identities = group.all_gather_many(&super::c10d::gpu_uuid(gpu).unwrap_or_default())?;
    let known: Vec<Option<&Vec<i64>>> =
        identities.iter().map(|uuid| uuid.iter().any(|&half| half != 0).then_some(uuid)).collect();
    let Some((first, second)) = first_shared(&known) else {
        return Ok(());
    };
    Err(Error::BadArguments(format!(
        "rank {} of {}: ranks {first} and {second} would sum the model through NCCL on the same GPU, and \
         NCCL takes one GPU per rank; give each rank on a machine its own GPU (its LOCAL_RANK picks among \
         --gpu-ids), or pass --gpu-ids -1 to sum through Gloo",
        group.rank, group.world_size
    )))
}

/// The first two ranks holding one known GPU, if any.
fn first_shared<T: PartialEq>(gpus: &[Option<T>]) -> Option<(usize, usize)> {
    gpus.iter().enumerate().find_map(|(second, gpu)| {
        let gpu = gpu.as_ref()?;
        gpus[..second]
            .iter()
            .position(|earlier| earlier.as_ref() == Some(gpu))
            .map(|first| (first, second))
    })
}

/// The sidecar of the checkpoint rank 0 resumes (`own` there), on every rank; `None`
/// when rank 0 starts afresh. The other ranks size their model from it, so that every
/// rank of a resumed run can be started with one command, model flags left out.
pub fn resumed_record(group: &mut Group, own: Option<&Sidecar>) -> Result<Option<Sidecar>> {
    let sent = match own {
        Some(sidecar) if group.rank == 0 => serde_json::to_vec(sidecar).unwrap_or_default(),
        _ => Vec::new(),
    };
    let received = broadcast_bytes(group, sent, 0)?;
    if received.is_empty() {
        return Ok(None);
    }
    serde_json::from_slice(&received).map(Some).map_err(|err| {
        Error::Training(format!(
            "rank {} of {}: rank 0's checkpoint record did not read here ({err}); start every rank with \
             the same a3g",
            group.rank, group.world_size
        ))
    })
}

/// Rank `root`'s `bytes` on every rank (the others' `bytes` are not read).
fn broadcast_bytes(group: &mut Group, bytes: Vec<u8>, root: usize) -> Result<Vec<u8>> {
    let mut length = (bytes.len() as u64).to_le_bytes();
    group.broadcast(&mut length, root)?;
    let mut received = if group.rank == root {
        bytes
    } else {
        vec![0u8; usize::try_from(u64::from_le_bytes(length)).unwrap_or(0)]
    };
    group.broadcast(&mut received, root)?;
    Ok(received)
}

/// The first setting in which `mine` and `theirs`, lists of `[label, value]` pairs,
/// differ: its label and both values as a user would type them (strings unquoted).
/// A setting one side lacks (another a3g's list) reads as "none" there.
fn first_difference(
    mine: &serde_json::Value,
    theirs: &serde_json::Value,
) -> Option<(String, String, String)> {
    let pairs = |settings: &serde_json::Value| -> Vec<(String, serde_json::Value)> {
        settings
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|pair| Some((pair.get(0)?.as_str()?.to_string(), pair.get(1)?.clone())))
            .collect()
    };
    let (mine, theirs) = (pairs(mine), pairs(theirs));
    let value_of = |settings: &[(String, serde_json::Value)], label: &str| {
        settings.iter().find(|(own, _)| own == label).map(|(_, value)| value.clone())
    };
    let written = |value: Option<serde_json::Value>| match value {
        None => "none".to_string(),
        Some(serde_json::Value::String(text)) => text,
        Some(value) => value.to_string(),
    };
    mine.iter().chain(&theirs).map(|(label, _)| label).find_map(|label| {
        let (a, b) = (value_of(&mine, label), value_of(&theirs, label));
        (a != b).then(|| (label.clone(), written(a), written(b)))
    })
}

/// The sync thread of one rank.
pub struct RankSync {
    group: Group,
    shared: SharedModel,
    point: SyncPoint,
    change: Vec<f32>,
    current: Vec<f32>,
    counters: Arc<TrainingCounters>,
    peers: Arc<PeerCounters>,
    interval: SyncInterval,
    /// The longest a default interval grows to: half of --sync-timeout, so that a
    /// rank entering its last sync an interval early does not give up on the others.
    longest_interval: Duration,
    /// The processor time this rank's last sync took the sync thread (its part of the
    /// gather and the merge; Gloo's own threads do the sums and the sockets' work), and
    /// the costliest rank's as of the last gather (the same on every
    /// rank).
    sync_cpu: Duration,
    costliest_sync_cpu: Duration,
    /// What the summed changes are scaled by (--sync-merge).
    share: f32,
    /// --max-steps over all ranks.
    step_budget: u64,
}

impl RankSync {
    /// Gives every rank rank 0's weights (a fresh model, or the checkpoint rank 0
    /// resumed) and prepares the syncs.
    pub fn start(
        mut group: Group,
        shared: SharedModel,
        counters: Arc<TrainingCounters>,
        peers: Arc<PeerCounters>,
        interval: SyncInterval,
        merge: SyncMerge,
        timeout: Duration,
        step_budget: u64,
    ) -> Result<Self> {
        let mut weights = vec![0.0f32; shared.numel()];
        if group.rank == 0 {
            shared.read_flat(&mut weights);
        }
        group.broadcast(as_bytes(&mut weights), 0)?;
        if group.rank != 0 {
            shared.write_flat(&weights);
        }
        let length = weights.len();
        let share = merge.share(group.world_size);
        let mut sync = RankSync {
            group,
            shared,
            point: SyncPoint::new(weights),
            change: vec![0.0; length],
            current: vec![0.0; length],
            counters,
            peers,
            interval,
            longest_interval: timeout / 2,
            sync_cpu: Duration::ZERO,
            costliest_sync_cpu: Duration::ZERO,
            share,
            step_budget,
        };
        // Before any thread trains: each rank's counts so far (rank 0's resumed ones),
        // which the status lines' rates then start from.
        sync.exchange_stop_and_counters(&Stop::default())?;
        Ok(sync)
    }

    /// Syncs every interval until a rank stops: a stop on this rank (its budget, a
    /// signal, a failure) is passed on at the next sync, which every rank takes part
    /// in before it ends, so the ranks end on the same agreed model.
    pub fn run(mut self, stop: &Stop) -> Result<()> {
        loop {
            let next =
                Instant::now() + self.interval.next(self.costliest_sync_cpu, self.longest_interval);
            while !stop.requested() {
                let left = next.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                std::thread::sleep(left.min(Duration::from_millis(20)));
            }
            let started_cpu = thread_cpu_time();
            let stopping = self.exchange_stop_and_counters(stop)?;
            if let Some((rank, code)) = stopping {
                // Before the last sync, so that this rank's threads stop stepping
                // while it runs and the ranks end on weights close to the agreed ones.
                if !stop.requested() {
                    stop.request(reason_of(code, rank));
                }
            }
            let merge = self.sync_model()?;
            self.sync_cpu = thread_cpu_time().saturating_sub(started_cpu);
            let nanos = |time: Duration| u64::try_from(time.as_nanos()).unwrap_or(u64::MAX);
            self.peers.merge_nanos.fetch_add(nanos(merge), Ordering::Relaxed);
            self.peers.sync_cpu_nanos.fetch_add(nanos(self.sync_cpu), Ordering::Relaxed);
            self.peers.syncs.fetch_add(1, Ordering::Relaxed);
            if stopping.is_some() {
                // The last agreement has no next exchange to be checked in.
                let digests = self.group.all_gather(self.agreed_digest() as i64)?;
                return check_digests(&digests);
            }
            let steps = self.counters.agent_steps.load(Ordering::Relaxed)
                + self.peers.agent_steps.load(Ordering::Relaxed);
            if steps >= self.step_budget {
                stop.request(StopReason::StepBudget);
            }
        }
    }

    /// One gather of each rank's stop code, counters and digest of the weights the
    /// ranks agreed on at the previous sync: the first rank stopping, with its code, and
    /// the other ranks' counters summed into `peers`; ranks whose agreed weights differ
    /// are an error. Checking the last agreement here, rather than in a gather of its
    /// own, leaves a sync two collectives: this gather and the model's all-reduce.
    fn exchange_stop_and_counters(&mut self, stop: &Stop) -> Result<Option<(usize, i64)>> {
        let own = [&self.counters.agent_steps, &self.counters.env_frames, &self.counters.updates];
        let peers = [&self.peers.agent_steps, &self.peers.env_frames, &self.peers.updates];
        let mine: Vec<u64> = own.iter().map(|count| count.load(Ordering::Relaxed)).collect();
        let mut values = vec![stop_code(stop.reason().as_ref())];
        values.extend(mine.iter().map(|&count| i64::try_from(count).unwrap_or(i64::MAX)));
        values.push(self.agreed_digest() as i64);
        values.push(i64::try_from(self.sync_cpu.as_micros()).unwrap_or(i64::MAX));
        debug_assert_eq!(values.len(), SYNC_GATHER);
        let gathered = self.group.all_gather_many(&values)?;
        let digests: Vec<i64> = gathered.iter().map(|rank| rank[1 + own.len()]).collect();
        check_digests(&digests)?;
        let costliest = gathered.iter().map(|rank| rank[2 + own.len()].max(0)).max().unwrap_or(0);
        self.costliest_sync_cpu = Duration::from_micros(costliest as u64);
        for (index, (peer, &mine)) in peers.iter().zip(&mine).enumerate() {
            let total: u64 = gathered.iter().map(|rank| rank[1 + index].max(0) as u64).sum();
            peer.store(total.saturating_sub(mine), Ordering::Relaxed);
        }
        Ok(gathered
            .iter()
            .enumerate()
            .find(|(_, rank)| rank[0] != 0)
            .map(|(rank, values)| (rank, values[0])))
    }

    /// Merges the ranks' changes to the model, returning how long it took. That every
    /// rank agreed on the same weights is checked at the next exchange (or, at the
    /// last sync, right after).
    fn sync_model(&mut self) -> Result<Duration> {
        // Timed from the end of the gather, which the ranks leave together, so that
        // the status lines' cost of a merge mostly leaves out a rank's wait for a
        // slower one.
        let started = Instant::now();
        self.shared.read_flat(&mut self.current);
        self.point.change_since(&self.current, &mut self.change);
        self.group.all_reduce_sum(&mut self.change)?;
        self.point.agree(&mut self.change, self.share);
        self.shared.add_flat(&self.change);
        Ok(started.elapsed())
    }

    /// A digest of the weights the ranks last agreed on, equal on every rank.
    fn agreed_digest(&self) -> u64 {
        self.point.agreed().iter().fold(0xcbf2_9ce4_8422_2325u64, |hash, value| {
            (hash ^ u64::from(value.to_bits())).wrapping_mul(0x0100_0000_01b3)
        })
    }
}

/// The processor time the calling thread has used so far.
fn thread_cpu_time() -> Duration {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `now` is a valid timespec for the call to fill; the thread clock exists
    // on every Linux, and should it fail the zero it leaves reads as no time.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    Duration::new(now.tv_sec.max(0) as u64, now.tv_nsec.clamp(0, 999_999_999) as u32)
}

/// Refuses to go on when the ranks' digests of their agreed weights differ: ranks
/// that drifted apart would each train a model of its own while the run reported one.
fn check_digests(digests: &[i64]) -> Result<()> {
    match digests.iter().position(|&digest| digest != digests[0]) {
        Some(rank) => Err(Error::Training(format!(
            "rank {rank}'s model differs from rank 0's after a sync; the ranks run different a3g builds \
             or libtorch versions, or memory was corrupted: restart every rank with the same a3g"
        ))),
        None => Ok(()),
    }
}

/// The bytes of `values`, for a broadcast.
fn as_bytes(values: &mut [f32]) -> &mut [u8] {
    // SAFETY: any bytes are a valid f32 and u8 has no alignment requirement; the slice
    // covers exactly the floats' memory and borrows them for as long.
    unsafe {
        std::slice::from_raw_parts_mut(
            values.as_mut_ptr().cast::<u8>(),
            std::mem::size_of_val(values),
        )
    }
}

/// How a stop travels between ranks: 0 for none.
fn stop_code(reason: Option<&StopReason>) -> i64 {
    match reason {
        None => 0,
        Some(StopReason::StepBudget) => 1,
        Some(StopReason::TimeBudget) => 2,
        Some(StopReason::TargetScore) => 3,
        Some(StopReason::Signal) => 4,
        Some(StopReason::Failure(_)) => 5,
    }
}

/// The stop that `rank` passed on as `code`.
fn reason_of(code: i64, rank: usize) -> StopReason {
    match code {
        1 => StopReason::StepBudget,
        2 => StopReason::TimeBudget,
        3 => StopReason::TargetScore,
        4 => StopReason::Signal,
        _ => StopReason::Failure(format!(
            "rank {rank} failed; its own output says why, and the other ranks stopped with it"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ranks holding one GPU are found by its identity; ranks whose GPU is unknown
    /// are never taken for sharing one.
    #[test]
    fn ranks_on_one_gpu_are_found() {
        assert_eq!(first_shared(&[Some([1, 2]), Some([3, 4]), Some([1, 5])]), None);
        assert_eq!(first_shared::<[i64; 2]>(&[None, None]), None);
        assert_eq!(first_shared(&[Some([1, 2]), None, Some([3, 4]), Some([3, 4])]), Some((2, 3)));
    }

    /// The first differing setting, in the list's order, is named by its label with
    /// both values written alike (strings unquoted), whichever side lacks it.
    #[test]
    fn the_first_differing_setting_is_named() {
        let mine = serde_json::json!([
            ["--env", "CartPole-v1"],
            ["--trainer", "a3c"],
            ["--num-steps", [20]],
            ["version", "0.1.0"]
        ]);
        let theirs = serde_json::json!([
            ["--env", "CartPole-v1"],
            ["--trainer", "ga3c"],
            ["--num-steps", [20]]
        ]);
        let (key, a, b) = first_difference(&mine, &theirs).expect("they differ");
        assert_eq!((key.as_str(), a.as_str(), b.as_str()), ("--trainer", "a3c", "ga3c"));
        let lacking = serde_json::json!([
            ["--env", "CartPole-v1"],
            ["--trainer", "a3c"],
            ["--num-steps", [20]]
        ]);
        let (key, a, b) = first_difference(&lacking, &mine).expect("they differ");
        assert_eq!((key.as_str(), a.as_str(), b.as_str()), ("version", "none", "0.1.0"));
        assert_eq!(first_difference(&mine, &mine.clone()), None);
    }

    /// Every stop travels as a code and comes back as the same reason (a failure
    /// names the rank that failed).
    #[test]
    fn stops_travel_between_ranks() {
        for reason in [
            StopReason::StepBudget,
            StopReason::TimeBudget,
            StopReason::TargetScore,
            StopReason::Signal,
        ] {
            assert_eq!(reason_of(stop_code(Some(&reason)), 1), reason);
        }
        assert_eq!(stop_code(None), 0);
        let failure = reason_of(stop_code(Some(&StopReason::Failure("x".into()))), 3);
        assert!(
            matches!(failure, StopReason::Failure(message) if message.starts_with("rank 3 failed"))
        );
    }
}
