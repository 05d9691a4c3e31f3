//! The arithmetic of one sync between ranks. Each rank trains its own shared model
//! Hogwild-style and, every sync, the ranks sum what each changed since the model
//! they last agreed on; the agreed model then moves by that sum (`--sync-merge sum`)
//! or by its mean. Writing the result over the live weights would throw away the
//! updates this rank's threads made while the sum travelled; instead the live weights
//! get `merged - own`, what the merge adds beyond this rank's own change (with the sum,
//! exactly the other ranks' changes), so that right after a sync every rank holds the
//! agreed model plus only the updates that landed during it.

use clap::ValueEnum;
use serde::{Deserialize, Serialize};

/// How a sync between ranks combines their changes to the model (`--sync-merge`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SyncMerge {
    /// Every rank's updates are applied, as if all the ranks' threads trained one
    /// Hogwild model (the other ranks' updates arriving up to an interval late): with N
    /// ranks the model moves N times as far per sync as with the mean.
    #[value(name = "sum")]
    Sum,
    /// The ranks' changes are averaged (model averaging): per sync the model moves
    /// about as far as one rank's updates took it, with less noise.
    #[value(name = "mean")]
    Mean,
}

impl SyncMerge {
    /// What the summed changes are multiplied by before they are applied.
    pub fn share(self, world_size: usize) -> f32 {
        match self {
            SyncMerge::Sum => 1.0,
            SyncMerge::Mean => 1.0 / world_size as f32,
        }
    }
}

/// The model as the ranks last agreed on it, flattened, with the buffers a sync uses.
pub struct SyncPoint {
    agreed: Vec<f32>,
    own: Vec<f32>,
}

impl SyncPoint {
    /// Starts from `initial`, the weights every rank begins with (rank 0's, broadcast).
    pub fn new(initial: Vec<f32>) -> Self {
        let own = vec![0.0; initial.len()];
        SyncPoint { agreed: initial, own }
    }

    /// The weights last agreed on.
    pub fn agreed(&self) -> &[f32] {
        &self.agreed
    }

    /// Writes this rank's change since the last agreement, `current - agreed`, into
    /// `change` (which the ranks then sum), and keeps a copy for [`SyncPoint::agree`].
    pub fn change_since(&mut self, current: &[f32], change: &mut [f32]) {
        for ((change, own), (&current, &agreed)) in
            change.iter_mut().zip(&mut self.own).zip(current.iter().zip(&self.agreed))
        {
            *change = current - agreed;
            *own = *change;
        }
    }

    /// Takes the ranks' summed changes (`summed`, identical on every rank): the agreed
    /// weights move by `share` of them ([`SyncMerge::share`]), and `summed` becomes what
    /// to add to the live weights, `merged - own`.
    pub fn agree(&mut self, summed: &mut [f32], share: f32) {
        for ((summed, agreed), &own) in summed.iter_mut().zip(&mut self.agreed).zip(&self.own) {
            let merged = *summed * share;
            *agreed += merged;
            *summed = merged - own;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two ranks start agreed, each trains, their changes are summed; rank 0's threads
    /// apply another update while the sum travels. After the sync both agree on the
    /// start plus the mean change, rank 1 holds exactly that, and rank 0 holds that
    /// plus the update made during the sync, which is kept, not overwritten.
    #[test]
    fn updates_made_during_a_sync_are_kept() {
        let start = vec![1.0f32, -2.0, 0.5];
        let mut ranks = [SyncPoint::new(start.clone()), SyncPoint::new(start.clone())];
        let mut live = [vec![1.5f32, -2.0, 0.25], vec![0.5f32, -1.0, 0.75]];
        let mut changes = [vec![0.0f32; 3], vec![0.0f32; 3]];
        for rank in 0..2 {
            ranks[rank].change_since(&live[rank], &mut changes[rank]);
        }
        let summed: Vec<f32> = changes[0].iter().zip(&changes[1]).map(|(a, b)| a + b).collect();
        let during_sync = [0.125f32, 0.0, -0.125];
        for (weight, update) in live[0].iter_mut().zip(during_sync) {
            *weight += update;
        }
        for rank in 0..2 {
            let mut correction = summed.clone();
            ranks[rank].agree(&mut correction, SyncMerge::Mean.share(2));
            for (weight, correction) in live[rank].iter_mut().zip(correction) {
                *weight += correction;
            }
        }
        let mean_model = [1.0f32, -1.5, 0.5];
        assert_eq!(ranks[0].agreed(), mean_model);
        assert_eq!(ranks[1].agreed(), mean_model);
        assert_eq!(live[1], mean_model);
        let with_update: Vec<f32> =
            mean_model.iter().zip(during_sync).map(|(m, u)| m + u).collect();
        assert_eq!(live[0], with_update);
    }

    /// With the sum, two ranks' changes both land in full: the agreed model is the
    /// start plus both changes, rank 1 holds exactly that, and rank 0 holds that plus
    /// the update its threads made while the sum travelled.
    #[test]
    fn the_sum_applies_every_ranks_change() {
        let start = vec![0.0f32, 1.0];
        let mut ranks = [SyncPoint::new(start.clone()), SyncPoint::new(start)];
        let mut live = [vec![0.5f32, 1.0], vec![0.25f32, 0.5]];
        let mut changes = [vec![0.0f32; 2], vec![0.0f32; 2]];
        for rank in 0..2 {
            ranks[rank].change_since(&live[rank], &mut changes[rank]);
        }
        let summed: Vec<f32> = changes[0].iter().zip(&changes[1]).map(|(a, b)| a + b).collect();
        let during_sync = [-0.25f32, 0.125];
        for (weight, update) in live[0].iter_mut().zip(during_sync) {
            *weight += update;
        }
        for rank in 0..2 {
            let mut correction = summed.clone();
            ranks[rank].agree(&mut correction, SyncMerge::Sum.share(2));
            for (weight, correction) in live[rank].iter_mut().zip(correction) {
                *weight += correction;
            }
        }
        let both_changes = [0.75f32, 0.5];
        assert_eq!(ranks[0].agreed(), both_changes);
        assert_eq!(ranks[1].agreed(), both_changes);
        assert_eq!(live[1], both_changes);
        assert_eq!(live[0], [0.5f32, 0.625]);
    }

    /// A rank alone (world size 1) keeps its weights under either merge: the sum and
    /// the mean of one change are that change.
    #[test]
    fn one_rank_changes_nothing() {
        for merge in [SyncMerge::Sum, SyncMerge::Mean] {
            let mut point = SyncPoint::new(vec![0.0, 1.0]);
            let live = [0.25f32, 0.75];
            let mut change = vec![0.0; 2];
            point.change_since(&live, &mut change);
            point.agree(&mut change, merge.share(1));
            assert_eq!(change, vec![0.0, 0.0]);
            assert_eq!(point.agreed(), live);
        }
    }
}
