//! How a Deployment passes a change of `spec.replicas` to its ReplicaSets (docs/hpa-behaviour.md
//! §9.3): the deployment controller's `scale` in `pkg/controller/deployment/sync.go`, with
//! `GetProportion` from `pkg/controller/deployment/util/deployment_util.go`.
//!
//! Modelled: the one-active-ReplicaSet case, the saturated new ReplicaSet, and the proportional
//! split of a RollingUpdate Deployment among its active ReplicaSets. Not modelled: the rollout
//! itself (`rolloutRolling`), a Recreate Deployment (whose `scale` changes nothing while two
//! ReplicaSets are active) and a missing or zero `max-replicas` annotation.

use std::cmp::Ordering;

/// One ReplicaSet of the Deployment as `scale` reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaSetScale {
    pub name: String,
    /// `spec.replicas`.
    pub replicas: i32,
    /// Creation order (`metadata.creationTimestamp`, the name breaking ties): larger is newer.
    pub created: u64,
    /// `deployment.kubernetes.io/desired-replicas`: the Deployment's `spec.replicas` when it
    /// last scaled this ReplicaSet.
    pub desired: i32,
    /// `deployment.kubernetes.io/max-replicas`: the Deployment's `spec.replicas + maxSurge`
    /// when it last scaled this ReplicaSet.
    pub max_replicas: i32,
    /// `status.availableReplicas`.
    pub available: i32,
}

/// The Deployment as `scale` reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeploymentScale {
    /// The new `spec.replicas` (what the HPA wrote).
    pub replicas: i32,
    /// `maxSurge` resolved against `replicas` (rounded up when a percentage).
    pub max_surge: i32,
    /// The strategy is RollingUpdate.
    pub rolling: bool,
}

/// The new `spec.replicas` of every ReplicaSet, in the order given; `new` is the index of the
/// ReplicaSet of the current template, if it exists.
pub fn scale(d: DeploymentScale, sets: &[ReplicaSetScale], new: Option<usize>) -> Vec<i32> {
    let mut sizes: Vec<i32> = sets.iter().map(|s| s.replicas).collect();
    let active: Vec<usize> = (0..sets.len()).filter(|&i| sets[i].replicas > 0).collect();
    // FindActiveOrLatest: one active ReplicaSet takes the whole count; with none active, the new
    // one (else the newest old one) does.
    let only = match active.as_slice() {
        [i] => Some(*i),
        [] => new.or_else(|| (0..sets.len()).max_by_key(|&i| sets[i].created)),
        _ => None,
    };
    if let Some(i) = only {
        sizes[i] = d.replicas;
        return sizes;
    }
    // IsSaturated: the new ReplicaSet already has every replica available; the old ones go to 0.
    if let Some(n) = new {
        let s = &sets[n];
        if s.replicas == d.replicas && s.desired == d.replicas && s.available == d.replicas {
            for i in active.into_iter().filter(|&i| i != n) {
                sizes[i] = 0;
            }
            return sizes;
        }
    }
    if !d.rolling {
        return sizes;
    }
    let allowed = if d.replicas > 0 {
        d.replicas + d.max_surge
    } else {
        0
    };
    let to_add = allowed - active.iter().map(|&i| sets[i].replicas).sum::<i32>();
    if to_add == 0 {
        return sizes;
    }
    // Larger first; among equals, newer first when growing and older first when shrinking.
    let mut order = active;
    order.sort_by(|&i, &j| {
        sets[j]
            .replicas
            .cmp(&sets[i].replicas)
            .then_with(|| match to_add.cmp(&0) {
                Ordering::Greater => sets[j].created.cmp(&sets[i].created),
                _ => sets[i].created.cmp(&sets[j].created),
            })
    });
    let mut added = 0;
    for &i in &order {
        let p = proportion(&sets[i], d, to_add, added);
        sizes[i] = sets[i].replicas + p;
        added += p;
    }
    // The leftover goes to the largest.
    let first = order[0];
    sizes[first] = (sizes[first] + to_add - added).max(0);
    sizes
}

/// `GetProportion`: this ReplicaSet's share of `to_add`, never past what is left of it.
fn proportion(s: &ReplicaSetScale, d: DeploymentScale, to_add: i32, added: i32) -> i32 {
    if s.replicas == 0 || to_add == 0 || to_add == added {
        return 0;
    }
    let fraction = fraction(s, d);
    let allowed = to_add - added;
    if to_add > 0 {
        fraction.min(allowed)
    } else {
        fraction.max(allowed)
    }
}

/// `getReplicaSetFraction`: `round(replicas × (spec + surge) / max-replicas) − replicas`, the
/// whole ReplicaSet when the Deployment goes to 0.
fn fraction(s: &ReplicaSetScale, d: DeploymentScale) -> i32 {
    if d.replicas == 0 {
        return -s.replicas;
    }
    if s.max_replicas <= 0 {
        return 0;
    }
    let size =
        f64::from(s.replicas) * f64::from(d.replicas + d.max_surge) / f64::from(s.max_replicas);
    // Go's `integer.RoundToInt32`: half away from zero.
    size.round() as i32 - s.replicas
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rs(name: &str, replicas: i32, created: u64, max_replicas: i32) -> ReplicaSetScale {
        ReplicaSetScale {
            name: name.into(),
            replicas,
            created,
            desired: max_replicas - 1,
            max_replicas,
            available: replicas,
        }
    }

    fn to(replicas: i32) -> DeploymentScale {
        DeploymentScale {
            replicas,
            max_surge: 1,
            rolling: true,
        }
    }

    #[test]
    fn one_active_replica_set_takes_the_whole_count() {
        let sets = [rs("old", 0, 1, 7), rs("new", 6, 2, 7)];
        assert_eq!(scale(to(4), &sets, Some(1)), vec![0, 4]);
        // None active: the new one.
        let idle = [rs("old", 0, 1, 7), rs("new", 0, 2, 7)];
        assert_eq!(scale(to(3), &idle, Some(1)), vec![0, 3]);
    }

    #[test]
    fn a_rollout_splits_a_scale_down_between_the_replica_sets() {
        // A paused rollout: 3 old pods and 4 new (6 + 1 surge), max-replicas 7; the HPA asks
        // for 4, so 5 pods may remain. The new (larger) one gives round(4·5/7) − 4 = −1, the
        // old one round(3·5/7) − 3 = −1.
        let sets = [rs("old", 3, 1, 7), rs("new", 4, 2, 7)];
        assert_eq!(scale(to(4), &sets, Some(1)), vec![2, 3]);
    }

    #[test]
    fn equal_sizes_shrink_the_older_first_and_grow_the_newer_first() {
        let sets = [rs("old", 3, 1, 7), rs("new", 3, 2, 7)];
        // Down to 4 (+1 surge): −1 remains; the older one takes the leftover.
        let down = scale(to(4), &sets, Some(1));
        assert_eq!(down.iter().sum::<i32>(), 5);
        assert_eq!(down, vec![2, 3]);
        let up = scale(to(9), &sets, Some(1));
        assert_eq!(up.iter().sum::<i32>(), 10);
        assert!(up[1] >= up[0], "{up:?}");
    }

    #[test]
    fn a_saturated_new_replica_set_empties_the_old_ones() {
        let sets = [rs("old", 2, 1, 7), rs("new", 6, 2, 7)];
        assert_eq!(scale(to(6), &sets, Some(1)), vec![0, 6]);
    }

    #[test]
    fn recreate_leaves_two_active_replica_sets_alone() {
        let sets = [rs("old", 3, 1, 7), rs("new", 4, 2, 7)];
        let recreate = DeploymentScale {
            rolling: false,
            ..to(4)
        };
        assert_eq!(scale(recreate, &sets, Some(1)), vec![3, 4]);
    }

    #[test]
    fn to_zero_empties_every_replica_set() {
        let sets = [rs("old", 3, 1, 7), rs("new", 4, 2, 7)];
        let zero = DeploymentScale {
            replicas: 0,
            max_surge: 0,
            rolling: true,
        };
        assert_eq!(scale(zero, &sets, Some(1)), vec![0, 0]);
    }
}
