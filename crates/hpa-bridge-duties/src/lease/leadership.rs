//! The Lease that makes one replica the writer of a duty (deletion costs, the memory): reads
//! and writes `coordination.k8s.io/v1` Leases every retry period, as the election
//! (`election.rs`) says, and tells the writer whether it may write (docs/deletion-cost.md,
//! "One writer").

use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use kube::Client;
use serde_json::json;

use super::election::{Election, LeaseRecord, Step};
use super::FIELD_MANAGER;
use hpa_bridge_rules::clock::{Clock, Millis};
use hpa_bridge_telemetry::self_metrics::SelfMetrics;

/// The lease's name when `--deletion-cost-lease` names none.
pub const DEFAULT_LEASE_NAME: &str = "hpa-bridge-deletion-cost";

/// `--deletion-cost-lease`: `[NAMESPACE/]NAME`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseName {
    pub namespace: Option<String>,
    pub name: String,
}

impl FromStr for LeaseName {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (namespace, name) = match s.split_once('/') {
            Some((ns, name)) => (Some(ns), name),
            None => (None, s),
        };
        // Both are DNS names (a namespace a label, a Lease a subdomain): what the API server
        // would refuse is refused here, at the flag.
        let valid = |part: &str, dots: bool| {
            !part.is_empty()
                && part.len() <= 253
                && part.bytes().all(|b| {
                    b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || (dots && b == b'.')
                })
                && part.starts_with(|c: char| c.is_ascii_alphanumeric())
                && part.ends_with(|c: char| c.is_ascii_alphanumeric())
        };
        if namespace.is_some_and(|ns| !valid(ns, false) || ns.len() > 63) || !valid(name, true) {
            return Err(format!(
                "{s:?} is not [NAMESPACE/]NAME of lower-case DNS names (for example hpa-bridge/hpa-bridge-deletion-cost)"
            ));
        }
        Ok(LeaseName {
            namespace: namespace.map(String::from),
            name: name.into(),
        })
    }
}

/// The election's durations (client-go's `LeaseDuration`, `RenewDeadline`, `RetryPeriod`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseTimings {
    /// How long a candidate waits, on its own clock, for a holder's renewal; whole seconds,
    /// as the Lease carries it.
    pub lease_duration: Duration,
    /// How long the holder keeps writing without a successful renewal.
    pub renew_deadline: Duration,
    /// The time between two reads of the lease.
    pub retry_period: Duration,
}

impl Default for LeaseTimings {
    /// kube-controller-manager's defaults.
    fn default() -> Self {
        LeaseTimings {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

impl LeaseTimings {
    /// The order the election needs: the holder stops writing (renewDeadline) before a
    /// candidate may take over (leaseDuration), and renews more than once in that time.
    pub fn check(&self) -> Result<(), String> {
        if self.lease_duration.subsec_nanos() != 0 || self.lease_duration.is_zero() {
            return Err(format!(
                "the lease duration must be a whole number of seconds, at least 1 (the Lease carries leaseDurationSeconds), not {:?}",
                self.lease_duration
            ));
        }
        if self.renew_deadline >= self.lease_duration {
            return Err(format!(
                "the renew deadline ({:?}) must be shorter than the lease duration ({:?}): the holder must stop writing before another replica may take over",
                self.renew_deadline, self.lease_duration
            ));
        }
        if self.retry_period.is_zero() || self.retry_period >= self.renew_deadline {
            return Err(format!(
                "the retry period ({:?}) must be above zero and shorter than the renew deadline ({:?}): the holder must get to renew before the deadline",
                self.retry_period, self.renew_deadline
            ));
        }
        Ok(())
    }
}

/// This replica's name in the lease: the pod's name (`POD_NAME` from the downward API, else
/// the host name, which Kubernetes sets to it) and a suffix unique to this process, so a
/// restarted container is a new candidate and never renews its predecessor's term.
pub fn identity() -> String {
    let pod = std::env::var("POD_NAME")
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|s| !s.is_empty()))
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
        })
        .unwrap_or_else(|| "hpa-bridge".into());
    format!("{pod}_{}", process_unique_suffix())
}

/// 16 hex digits from the standard library's per-process random hash keys, the process id and
/// the time.
fn process_unique_suffix() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    if let Ok(t) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        h.write_u128(t.as_nanos());
    }
    format!("{:016x}", h.finish())
}

/// What the lease's holder alone does: each duty has its own lease, so one replica may write
/// deletion costs while another writes the memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Duty {
    DeletionCost,
    Memory,
}

impl Duty {
    fn lease(self) -> &'static str {
        match self {
            Duty::DeletionCost => "the deletion-cost lease",
            Duty::Memory => "the memory lease",
        }
    }

    fn work(self) -> &'static str {
        match self {
            Duty::DeletionCost => "writes deletion costs",
            Duty::Memory => "writes the memory",
        }
    }

    /// Where the RBAC the lease needs is shipped.
    fn rbac(self) -> &'static str {
        match self {
            Duty::DeletionCost => "manifests/overlays/deletion-cost",
            Duty::Memory => "manifests/base",
        }
    }

    fn set_gauge(self, metrics: &SelfMetrics, leading: bool) {
        match self {
            Duty::DeletionCost => metrics.deletion_cost_leader(leading),
            Duty::Memory => metrics.memory_writer(leading),
        }
    }
}

/// Whether this replica holds a duty's lease, kept current by a task that reads and
/// writes it every retry period.
pub struct Leadership {
    duty: Duty,
    client: Client,
    api: Api<Lease>,
    namespace: String,
    name: String,
    timings: LeaseTimings,
    clock: Arc<dyn Clock>,
    metrics: Arc<SelfMetrics>,
    election: Mutex<Election>,
    /// Held shared by each patch in flight and exclusively by `resign`: the lease is given up
    /// only once the last patch sent under it is answered or abandoned.
    patches: tokio::sync::RwLock<()>,
    /// Held by each round, so that `resign` never races a renewal.
    rounds: tokio::sync::Mutex<()>,
    resigned: AtomicBool,
    /// What was last logged: leading, and the holder seen.
    reported: Mutex<(bool, Option<String>)>,
    /// The lease could not be read or written last round (logged once per run of failures).
    failing: AtomicBool,
}

impl Leadership {
    /// Start campaigning for the Lease `(namespace, name)` as `identity`.
    pub fn start(
        duty: Duty,
        client: Client,
        (namespace, name): (&str, &str),
        identity: String,
        timings: LeaseTimings,
        clock: Arc<dyn Clock>,
        metrics: Arc<SelfMetrics>,
    ) -> Arc<Leadership> {
        let duration_s = timings.lease_duration.as_secs().min(i32::MAX as u64) as i32;
        let leadership = Arc::new(Leadership {
            duty,
            api: Api::namespaced(client.clone(), namespace),
            client,
            namespace: namespace.into(),
            name: name.into(),
            timings,
            clock,
            metrics,
            election: Mutex::new(Election::new(
                identity,
                duration_s,
                timings.renew_deadline.as_millis() as Millis,
            )),
            patches: tokio::sync::RwLock::new(()),
            rounds: tokio::sync::Mutex::new(()),
            resigned: AtomicBool::new(false),
            reported: Mutex::new((false, None)),
            failing: AtomicBool::new(false),
        });
        duty.set_gauge(&leadership.metrics, false);
        let l = leadership.clone();
        tokio::spawn(async move {
            tracing::info!(
                lease = %l.describe(),
                identity = %l.election().identity(),
                lease_duration = ?l.timings.lease_duration,
                renew_deadline = ?l.timings.renew_deadline,
                retry_period = ?l.timings.retry_period,
                "campaigning for {}; only its holder {}",
                l.duty.lease(),
                l.duty.work(),
            );
            loop {
                {
                    let _round = l.rounds.lock().await;
                    if l.resigned.load(Ordering::SeqCst) {
                        return;
                    }
                    // A round that hangs must not outlive the deadline it is renewing for.
                    let _ = tokio::time::timeout(l.timings.renew_deadline, l.round()).await;
                    l.report();
                }
                tokio::time::sleep(l.timings.retry_period).await;
            }
        });
        leadership
    }

    fn election(&self) -> std::sync::MutexGuard<'_, Election> {
        self.election.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn describe(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// The client the lease is held through, for the writes it permits.
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// Whether this replica may write now.
    pub fn leading(&self) -> bool {
        self.lead_left().is_some()
    }

    /// How much longer this replica leads without another renewal, while it leads.
    fn lead_left(&self) -> Option<Duration> {
        if self.resigned.load(Ordering::SeqCst) {
            return None;
        }
        let left = self.election().lead_left_ms(self.clock.mono_ms())?;
        Some(Duration::from_millis(left.unsigned_abs()))
    }

    /// Leave to send one patch, and how long this replica leads at most without another
    /// renewal: `None` unless it leads now. Hold it until the patch is answered or abandoned.
    pub async fn permit(&self) -> Option<(tokio::sync::RwLockReadGuard<'_, ()>, Duration)> {
        let permit = self.patches.read().await;
        self.lead_left().map(|left| (permit, left))
    }

    /// The lease as this replica sees it, for `/status`.
    pub fn status(&self) -> serde_json::Value {
        let leading = self.leading();
        let e = self.election();
        json!({
            "lease": self.describe(),
            "identity": e.identity(),
            "holder": e.holder(),
            "leading": leading,
        })
    }

    /// Give the lease up on a clean shutdown (client-go's `ReleaseOnCancel`): stop writing,
    /// wait for the patch in flight to be answered or abandoned, then clear the holder so
    /// another replica takes over at once instead of after the lease duration.
    pub async fn resign(&self) {
        self.resigned.store(true, Ordering::SeqCst);
        let _patches = self.patches.write().await;
        let _round = self.rounds.lock().await;
        let released = self.release().await;
        self.report();
        match released {
            Ok(true) => {
                tracing::info!(lease = %self.describe(), "released {}", self.duty.lease())
            }
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(lease = %self.describe(), error = %e, "releasing {} failed; another replica takes over once it expires", self.duty.lease())
            }
        }
    }

    /// Whether a release was written.
    async fn release(&self) -> Result<bool, kube::Error> {
        let Some(mut lease) = self.api.get_opt(&self.name).await? else {
            return Ok(false);
        };
        // Only a lease this replica still holds is released: the record read decides.
        let now = self.clock.now();
        let record = {
            let mut e = self.election();
            let _ = e.step(Some(&record_of(&lease)), now);
            e.release(now)
        };
        let Some(record) = record else {
            return Ok(false);
        };
        lease.spec = Some(spec_of(&record));
        let written = self.api.replace(&self.name, &post_params(), &lease).await?;
        self.election()
            .written(record_of(&written), now.mono, self.clock.mono_ms());
        Ok(true)
    }

    /// One read of the lease and the write it calls for.
    async fn round(&self) {
        let read = self.api.get_opt(&self.name).await;
        let lease = match read {
            Ok(lease) => lease,
            Err(e) => return self.failed("reading", &e),
        };
        let now = self.clock.now();
        let step = self
            .election()
            .step(lease.as_ref().map(record_of).as_ref(), now);
        let result = match (step, lease) {
            (Step::Wait, _) => return self.succeeded(),
            (Step::Create(record), _) => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.name.clone()),
                        namespace: Some(self.namespace.clone()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(spec_of(&record)),
                };
                self.api.create(&post_params(), &lease).await
            }
            (Step::Replace(record), Some(mut lease)) => {
                // The object as read, so the write carries its resourceVersion.
                lease.spec = Some(spec_of(&record));
                self.api.replace(&self.name, &post_params(), &lease).await
            }
            (Step::Replace(_), None) => return,
        };
        match result {
            Ok(written) => {
                self.election()
                    .written(record_of(&written), now.mono, self.clock.mono_ms());
                self.succeeded();
            }
            Err(e) => {
                let conflict = matches!(&e, kube::Error::Api(s) if s.code == 409);
                self.election().refused(conflict);
                if conflict {
                    // Another replica wrote first: an ordinary outcome of the race.
                    tracing::debug!(lease = %self.describe(), "another replica wrote the lease first");
                    self.succeeded();
                } else {
                    self.failed("writing", &e);
                }
            }
        }
    }

    fn succeeded(&self) {
        if self.failing.swap(false, Ordering::SeqCst) {
            tracing::info!(lease = %self.describe(), "{} can be read and written again", self.duty.lease());
        }
    }

    fn failed(&self, doing: &str, e: &kube::Error) {
        if !self.failing.swap(true, Ordering::SeqCst) {
            tracing::warn!(lease = %self.describe(), error = %e, "{doing} {} failed (needs get, create and update on leases in its namespace: {}); retrying every retry period", self.duty.lease(), self.duty.rbac());
        } else {
            tracing::debug!(lease = %self.describe(), error = %e, "{doing} {} failed", self.duty.lease());
        }
    }

    /// Log a change of leadership or of the holder seen, and set the gauge.
    fn report(&self) {
        let leading = self.leading();
        let holder = self.election().holder().map(String::from);
        let mut reported = self.reported.lock().unwrap_or_else(|e| e.into_inner());
        if reported.0 != leading {
            self.duty.set_gauge(&self.metrics, leading);
            if leading {
                tracing::info!(lease = %self.describe(), identity = %self.election().identity(), "acquired {}: this replica {}", self.duty.lease(), self.duty.work());
            } else {
                tracing::warn!(lease = %self.describe(), holder = holder.as_deref().unwrap_or(""), "lost {}: another replica {}", self.duty.lease(), self.duty.work());
            }
        }
        if reported.1 != holder && !leading {
            tracing::info!(lease = %self.describe(), holder = holder.as_deref().unwrap_or(""), "{} has a new holder", self.duty.lease());
        }
        *reported = (leading, holder);
    }
}

fn post_params() -> PostParams {
    PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PostParams::default()
    }
}

fn record_of(lease: &Lease) -> LeaseRecord {
    let spec = lease.spec.clone().unwrap_or_default();
    LeaseRecord {
        holder: spec.holder_identity.unwrap_or_default(),
        duration_s: spec.lease_duration_seconds.unwrap_or(0),
        acquire_ms: spec.acquire_time.map(|t| t.0.as_millisecond()),
        renew_ms: spec.renew_time.map(|t| t.0.as_millisecond()),
        transitions: spec.lease_transitions.unwrap_or(0),
    }
}

/// The whole spec is replaced, as client-go's `LeaseLock` does.
fn spec_of(r: &LeaseRecord) -> LeaseSpec {
    let time = |ms: Option<Millis>| {
        ms.and_then(|ms| Timestamp::from_millisecond(ms).ok())
            .map(MicroTime)
    };
    LeaseSpec {
        holder_identity: (!r.holder.is_empty()).then(|| r.holder.clone()),
        lease_duration_seconds: Some(r.duration_s),
        acquire_time: time(r.acquire_ms),
        renew_time: time(r.renew_ms),
        lease_transitions: Some(r.transitions),
        ..LeaseSpec::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_names_take_an_optional_namespace() {
        assert_eq!(
            "hpa-bridge/hpa-bridge-deletion-cost".parse::<LeaseName>(),
            Ok(LeaseName {
                namespace: Some("hpa-bridge".into()),
                name: "hpa-bridge-deletion-cost".into()
            })
        );
        assert_eq!(
            "writer.lease".parse::<LeaseName>(),
            Ok(LeaseName {
                namespace: None,
                name: "writer.lease".into()
            })
        );
        for bad in ["", "/x", "ns/", "Ns/x", "a/b/c", "ns.dot/x", "-x", "x_y"] {
            assert!(bad.parse::<LeaseName>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn timings_must_let_the_holder_stop_before_a_takeover() {
        let s = Duration::from_secs;
        let t = |l, r, p| LeaseTimings {
            lease_duration: l,
            renew_deadline: r,
            retry_period: p,
        };
        assert_eq!(LeaseTimings::default().check(), Ok(()));
        assert_eq!(
            t(
                s(2),
                Duration::from_millis(1500),
                Duration::from_millis(200)
            )
            .check(),
            Ok(())
        );
        assert!(t(s(10), s(10), s(2)).check().is_err());
        assert!(t(s(15), s(10), s(10)).check().is_err());
        assert!(t(s(15), s(10), s(0)).check().is_err());
        assert!(t(Duration::from_millis(1500), s(1), s(0)).check().is_err());
    }

    #[test]
    fn a_record_survives_the_lease_spec() {
        let r = LeaseRecord {
            holder: "pod-a_0123".into(),
            duration_s: 15,
            acquire_ms: Some(1_700_000_000_123),
            renew_ms: Some(1_700_000_001_456),
            transitions: 3,
        };
        let lease = Lease {
            spec: Some(spec_of(&r)),
            ..Lease::default()
        };
        assert_eq!(record_of(&lease), r);
        let released = LeaseRecord {
            holder: String::new(),
            ..r
        };
        let spec = spec_of(&released);
        assert_eq!(spec.holder_identity, None);
    }

    #[test]
    fn each_identity_is_unique() {
        let (a, b) = (identity(), identity());
        assert_ne!(a, b);
        assert!(
            a.rsplit_once('_').is_some_and(|(_, s)| s.len() == 16),
            "{a}"
        );
    }
}
