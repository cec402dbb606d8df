//! The oracle: README's rules written plainly, in the tests only.
//!
//! It keeps what happened (every page and failure of every target, the target set, the
//! cluster's facts) as a log, and answers a query by scanning that log from the start: no
//! index, no cache, no summary, no per-request memo, and no code shared with the engine, so a
//! mistake in the engine cannot hide in both. Only the configuration types are shared, read
//! for the rule each metric names.

use std::collections::BTreeMap;

/// Milliseconds.
pub type Ms = i64;

/// How a query is answered, as far as the HPA can tell: a value, or a refusal of a kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Value(u64),
    Refused(Kind),
    /// The metric is not configured (404, not a rule's refusal).
    Unknown,
}

/// The refusal kinds README's table names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    NoMatch,
    Stale,
    Partial,
    IncompleteFloor,
    Invalid,
    GateClosed,
}

/// A rule's result: an outcome, and for an incomplete floor or a blocked value the known
/// lower bound (`Refused` with a bound).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Rule {
    Value(u64),
    Refused(Kind, Option<u64>),
}

impl Rule {
    fn value(&self) -> Option<u64> {
        match self {
            Rule::Value(v) => Some(*v),
            Rule::Refused(..) => None,
        }
    }
    fn kind(&self) -> Option<Kind> {
        match self {
            Rule::Value(_) => None,
            Rule::Refused(k, _) => Some(*k),
        }
    }
}

#[derive(Clone, Debug)]
pub struct Sample {
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub value: f64,
    /// The exporter's own timestamp (wall clock).
    pub timestamp: Option<Ms>,
}

#[derive(Clone, Debug)]
enum Scrape {
    Page {
        wall: Ms,
        mono: Ms,
        samples: Vec<Sample>,
    },
    Failed,
}

#[derive(Clone, Debug, PartialEq)]
pub struct TargetSpec {
    pub id: String,
    pub labels: BTreeMap<String, String>,
    /// The workload the pod belongs to, from discovery.
    pub workload: Option<Workload>,
}

/// A target as a restarted adapter is told it was: its spec, and each series with a valid
/// value as (name, labels, value, measured at).
#[derive(Clone, Debug, PartialEq)]
pub struct Remembered {
    pub spec: TargetSpec,
    pub series: Vec<RememberedSeries>,
}

/// (name, labels, value, measured at)
pub type RememberedSeries = (String, BTreeMap<String, String>, u64, Ms);

#[derive(Clone, Debug)]
struct Target {
    spec: TargetSpec,
    /// Since the target (re)joined the set with these labels.
    scrapes: Vec<Scrape>,
}

/// What the cluster says about workloads: spec.replicas, ordinals start, and whether its
/// pod list is known.
#[derive(Clone, Debug, Default)]
pub struct ClusterFacts {
    pub replicas: BTreeMap<Workload, u64>,
    pub ordinals_start: BTreeMap<Workload, u64>,
    pub pods_known: bool,
    /// Deployments annotated `hpa-bridge.io/deletion-cost: stateful-index`.
    pub opted_in: Vec<Workload>,
    /// What the watch shows of a pod beyond its workload, by pod name; a pod not here is not
    /// Ready, has no cost annotation and no ReplicaSet.
    pub pod_state: BTreeMap<String, PodState>,
    /// Whether the ReplicaSets are known (their watch synced).
    pub replica_sets_known: bool,
    /// `spec.replicas` of each ReplicaSet a Deployment controls, by Deployment and name; a
    /// Deployment not here has none.
    pub replica_sets: BTreeMap<Workload, BTreeMap<String, u64>>,
    /// ReplicaSets whose pods the facts have not followed to their controller: they may be
    /// an opted-in Deployment's.
    pub unresolved: Vec<Workload>,
}

/// A pod's Ready condition, its `pod-deletion-cost` annotation and its ReplicaSet.
#[derive(Clone, Debug, Default)]
pub struct PodState {
    pub ready: bool,
    pub cost: Option<String>,
    pub replica_set: Option<String>,
}

impl ClusterFacts {
    fn replicas(&self, w: &Workload) -> Option<u64> {
        self.replicas.get(w).copied()
    }
    fn ordinals_start(&self, w: &Workload) -> u64 {
        if w.0 != "StatefulSet" {
            return 0;
        }
        self.ordinals_start.get(w).copied().unwrap_or(0)
    }
    /// Pod name -> its workload, in `namespace`, from the listed pods.
    fn pods(
        &self,
        listed: &[(String, String, Option<Workload>)],
        namespace: &str,
    ) -> Option<BTreeMap<String, Option<Workload>>> {
        self.pods_known.then(|| {
            listed
                .iter()
                .filter(|(ns, _, _)| ns == namespace)
                .map(|(_, pod, w)| (pod.clone(), w.clone()))
                .collect()
        })
    }
}

/// One metric as configured, in the oracle's own terms.
#[derive(Clone, Debug)]
pub enum Metric {
    Recommendation {
        series: Vec<String>,
        gate: Option<(String, f64)>,
        current_series: Option<String>,
        /// Only the series of the newest epoch in this label count.
        epoch_label: Option<String>,
        /// How far above the newest older epoch still fresh a newest epoch may be.
        epoch_step: u64,
    },
    Floor {
        series: Vec<String>,
    },
    Target {
        inputs: Vec<String>,
        floor: Option<String>,
    },
}

pub struct Oracle {
    pub metrics: BTreeMap<String, Metric>,
    pub stale_after: Ms,
    targets: Vec<Target>,
    pub cluster: Option<ClusterFacts>,
}

/// The workload label names of Object queries (the defaults).
const KIND_LABEL: &str = "hpa_target_kind";
const NAME_LABEL: &str = "hpa_target_name";
const API_VERSION_LABEL: &str = "hpa_target_api_version";

/// A query's scope: the namespace and a selector, and for an Object query the workload.
#[derive(Clone, Debug)]
pub struct Query {
    pub metric: String,
    pub namespace: String,
    pub selector: Vec<Req>,
    /// (kind, name): an Object query for this workload.
    pub object: Option<(String, String)>,
}

/// A label selector requirement, as Kubernetes defines it.
#[derive(Clone, Debug)]
pub enum Req {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

impl Req {
    /// As Prometheus matches: a label not set reads as the empty value, so `k=""` and
    /// `k in ("",a)` select series without `k`.
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let value = |k: &String| labels.get(k).map_or("", String::as_str);
        match self {
            Req::Eq(k, v) => value(k) == v,
            Req::NotEq(k, v) => value(k) != v,
            Req::In(k, vs) => vs.iter().any(|x| x == value(k)),
            Req::NotIn(k, vs) => !vs.iter().any(|x| x == value(k)),
            Req::Exists(k) => labels.contains_key(k),
            Req::NotExists(k) => !labels.contains_key(k),
        }
    }

    fn key(&self) -> &String {
        match self {
            Req::Eq(k, _)
            | Req::NotEq(k, _)
            | Req::In(k, _)
            | Req::NotIn(k, _)
            | Req::Exists(k)
            | Req::NotExists(k) => k,
        }
    }

    /// Could a series of a target with these labels match? Only keys the target sets can rule
    /// it out, since target labels win over the exporter's.
    fn could_match(&self, target: &BTreeMap<String, String>) -> bool {
        !target.contains_key(self.key()) || self.matches(target)
    }

    /// Does every series of a target with these labels match? Only where the target sets
    /// the key: the exporter chooses the others.
    fn surely_matches(&self, target: &BTreeMap<String, String>) -> bool {
        target.contains_key(self.key()) && self.matches(target)
    }
}

/// One series as the rules read it at a moment.
#[derive(Clone, Debug)]
struct Observed {
    target: usize,
    name: String,
    present: bool,
    /// Unusable whatever its value: held twice in its last page, timed from the future, or
    /// out of order.
    duplicated: bool,
    /// Its last page's sample was older than the one it held: unknown however old that is.
    out_of_order: bool,
    value: f64,
    /// Its age now, in ms.
    age: Ms,
    /// The newest value seen once and valid.
    last_valid: Option<u64>,
    /// When that value was measured: its producer's time, else its scrape's (wall clock).
    last_valid_at: Ms,
}

fn invalid(v: f64) -> bool {
    !v.is_finite() || v < 0.0 || v.fract() != 0.0 || v > 1_000_000.0
}

/// Labels as Prometheus sees them: an empty value is no label.
fn nonempty(labels: impl IntoIterator<Item = (String, String)>) -> BTreeMap<String, String> {
    labels.into_iter().filter(|(_, v)| !v.is_empty()).collect()
}

/// The exporter's labels under the target's: the target's win, and a conflicting exporter
/// label is kept as `exported_<name>`.
fn merged(
    sample: &[(String, String)],
    target: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let target = nonempty(target.clone());
    let mut out = target.clone();
    for (k, v) in nonempty(sample.iter().cloned()) {
        match target.get(&k) {
            Some(tv) if *tv != v => {
                out.insert(format!("exported_{k}"), v);
            }
            Some(_) => {}
            None => {
                out.insert(k, v);
            }
        }
    }
    out
}

/// Could a target with these labels export series in scope? Its namespace and the keys it
/// sets can rule it out; keys it does not set are the exporter's to choose.
fn could_be_in_scope(namespace: &str, reqs: &[Req], target: &BTreeMap<String, String>) -> bool {
    let target = nonempty(target.clone());
    if target.get("namespace").is_some_and(|ns| ns != namespace) {
        return false;
    }
    reqs.iter().all(|r| r.could_match(&target))
}

/// Is every series a target with these labels exports in scope, whatever its exporter
/// writes? Its own labels must set the namespace and satisfy every requirement.
fn surely_in_scope(namespace: &str, reqs: &[Req], target: &BTreeMap<String, String>) -> bool {
    let target = nonempty(target.clone());
    target.get("namespace").is_some_and(|ns| ns == namespace)
        && reqs.iter().all(|r| r.surely_matches(&target))
}

/// A leader epoch as written: digits only, as a number.
fn epoch_in(labels: &BTreeMap<String, String>, label: &str) -> Option<u64> {
    labels
        .get(label)
        .filter(|v| !v.is_empty() && v.chars().all(|c| c.is_ascii_digit()))
        .and_then(|v| v.parse::<u64>().ok())
}

/// (kind, namespace, name)
pub type Workload = (String, String, String);

/// What a query's scope holds (see `Oracle::scoped`).
struct Ev {
    obs: Vec<(BTreeMap<String, String>, Observed)>,
    /// Never-scraped targets that could hold series in scope (with workloads in scope, a
    /// never-scraped pod of another workload is left out), each with whether it is a
    /// bystander: a pod while the scope's series come only from targets of no workload,
    /// which a floor counts and the other rules leave out (docs/unknown-input.md).
    unknown: Vec<(usize, bool)>,
    workloads: Vec<Workload>,
    silent: Vec<Workload>,
    /// Static targets whose own labels put everything they export in scope, that had pages
    /// but never a series in scope.
    silent_static: Vec<usize>,
}

impl Ev {
    /// The never-scraped targets every rule counts: bystanders only a floor does.
    fn unknown_to_all(&self) -> impl Iterator<Item = usize> + '_ {
        self.unknown
            .iter()
            .filter(|(_, bystander)| !bystander)
            .map(|(ti, _)| *ti)
    }

    /// The series still exported by their targets.
    fn present(&self) -> Vec<&Observed> {
        self.obs
            .iter()
            .map(|(_, o)| o)
            .filter(|o| o.present)
            .collect()
    }
}

impl Oracle {
    pub fn new(metrics: BTreeMap<String, Metric>, stale_after: Ms) -> Self {
        Oracle {
            metrics,
            stale_after,
            targets: Vec::new(),
            cluster: None,
        }
    }

    /// The target set is replaced: a target that stays with the same labels keeps its log;
    /// one that changed or is new starts empty (never scraped).
    pub fn set_targets(&mut self, specs: Vec<TargetSpec>) {
        let old = std::mem::take(&mut self.targets);
        for spec in specs {
            let scrapes = old
                .iter()
                .find(|t| t.spec == spec)
                .map(|t| t.scrapes.clone())
                .unwrap_or_default();
            self.targets.push(Target { spec, scrapes });
        }
    }

    /// The adapter restarts: whatever it held is lost, and every target is as if it had
    /// just joined, never scraped.
    pub fn restart(&mut self) {
        for t in &mut self.targets {
            t.scrapes.clear();
        }
    }

    /// What a successor is given to remember: each target that had a page, with every series
    /// that has a valid value, that value and when it was measured.
    pub fn memory(&self, wall_now: Ms, mono_now: Ms) -> Vec<Remembered> {
        (0..self.targets.len())
            .filter(|&ti| Self::succeeded(&self.targets[ti]))
            .filter_map(|ti| {
                let mut series: Vec<RememberedSeries> = self
                    .observed(ti, wall_now, mono_now)
                    .into_iter()
                    .filter_map(|(name, labels, o)| {
                        Some((name, labels, o.last_valid?, o.last_valid_at))
                    })
                    .collect();
                series.sort();
                (!series.is_empty()).then(|| Remembered {
                    spec: self.targets[ti].spec.clone(),
                    series,
                })
            })
            .collect()
    }

    /// After a restart: each target never scraped since, that is still the target it was,
    /// reads as if it had had its remembered series on a page at `written_at` and failed
    /// ever since. Those are taken out of `memory`.
    pub fn remember(&mut self, memory: &mut Vec<Remembered>, written_at: Ms, mono_now: Ms) {
        memory.retain(|r| {
            let Some(t) = self
                .targets
                .iter_mut()
                .find(|t| t.spec == r.spec && !Self::succeeded(t))
            else {
                return true;
            };
            let samples = r
                .series
                .iter()
                .map(|(name, labels, value, at)| Sample {
                    name: name.clone(),
                    labels: labels.clone().into_iter().collect(),
                    value: *value as f64,
                    timestamp: Some(*at),
                })
                .collect();
            t.scrapes = vec![
                Scrape::Page {
                    wall: written_at,
                    mono: mono_now,
                    samples,
                },
                Scrape::Failed,
            ];
            false
        });
    }

    pub fn page(&mut self, id: &str, wall: Ms, mono: Ms, samples: Vec<Sample>) {
        if let Some(t) = self.targets.iter_mut().find(|t| t.spec.id == id) {
            t.scrapes.push(Scrape::Page {
                wall,
                mono,
                samples,
            });
        }
    }

    pub fn fail(&mut self, id: &str) {
        if let Some(t) = self.targets.iter_mut().find(|t| t.spec.id == id) {
            t.scrapes.push(Scrape::Failed);
        }
    }

    fn succeeded(t: &Target) -> bool {
        t.scrapes.iter().any(|s| matches!(s, Scrape::Page { .. }))
    }

    /// Every series a target ever exported since it joined, by (name, labels), read now.
    fn observed(
        &self,
        ti: usize,
        wall_now: Ms,
        mono_now: Ms,
    ) -> Vec<(String, BTreeMap<String, String>, Observed)> {
        let t = &self.targets[ti];
        let pages: Vec<(Ms, Ms, &Vec<Sample>)> = t
            .scrapes
            .iter()
            .filter_map(|s| match s {
                Scrape::Page {
                    wall,
                    mono,
                    samples,
                } => Some((*wall, *mono, samples)),
                Scrape::Failed => None,
            })
            .collect();
        let mut keys: Vec<(String, BTreeMap<String, String>)> = Vec::new();
        for (_, _, samples) in &pages {
            for s in samples.iter() {
                let key = (s.name.clone(), merged(&s.labels, &t.spec.labels));
                if !keys.contains(&key) {
                    keys.push(key);
                }
            }
        }
        let mut out = Vec::new();
        for (name, labels) in keys {
            let mut o = Observed {
                target: ti,
                name: name.clone(),
                present: false,
                duplicated: false,
                out_of_order: false,
                value: f64::NAN,
                age: 0,
                last_valid: None,
                last_valid_at: 0,
            };
            let mut newest: Option<Ms> = None;
            // The value of the sample that set `newest`.
            let mut held = f64::NAN;
            for (i, (wall, mono, samples)) in pages.iter().enumerate() {
                let of_key: Vec<&Sample> = samples
                    .iter()
                    .filter(|s| s.name == name && merged(&s.labels, &t.spec.labels) == labels)
                    .collect();
                let Some(first) = of_key.first() else {
                    continue;
                };
                let last_page = i + 1 == pages.len();
                // A producer's time further ahead than scrape.maxClockSkew (10s by default)
                // makes the sample unusable, as a duplicate is: read as invalid, never retained.
                let from_the_future = first.timestamp.is_some_and(|ts| ts > *wall + 10_000);
                // So does a producer's time older than the series' newest sample (ordered by
                // the producer's time as given, or the scrape's when it gave none usable); the
                // series keeps that sample's age and its retained value, and reads as unknown
                // however old that sample grows.
                let order_at = first
                    .timestamp
                    .filter(|_| !from_the_future)
                    .unwrap_or(*wall);
                // The same producer time again with another value is a duplicate sample, which
                // Prometheus refuses as it refuses an older one.
                let out_of_order = first.timestamp.is_some_and(|ts| {
                    newest.is_some_and(|n| {
                        ts < n || (ts == n && first.value.to_bits() != held.to_bits())
                    })
                });
                o.present = last_page;
                o.duplicated = last_page && (of_key.len() > 1 || from_the_future || out_of_order);
                o.out_of_order = last_page && out_of_order;
                if out_of_order {
                    continue;
                }
                newest = Some(order_at);
                held = first.value;
                o.value = if of_key.len() > 1 {
                    f64::NAN
                } else {
                    first.value
                };
                // A producer's timestamp ages by the wall clock (never from the future); a
                // scraped sample's by the monotonic one.
                o.age = match first.timestamp {
                    Some(ts) => wall_now - ts.clamp(0, *wall),
                    None => mono_now - mono,
                };
                if of_key.len() == 1 && !invalid(first.value) && !from_the_future {
                    o.last_valid = Some(first.value as u64);
                    o.last_valid_at = first.timestamp.map_or(*wall, |ts| ts.clamp(0, *wall));
                }
            }
            out.push((name, labels, o));
        }
        out
    }

    /// The series of `series` names in `namespace` that `reqs` select, the targets that
    /// might hold some but never had a page, the workloads behind them, and whether a pod of
    /// one of those workloads had pages with nothing in scope.
    fn scoped(&self, namespace: &str, reqs: &[Req], series: &[String], wall: Ms, mono: Ms) -> Ev {
        let mut obs = Vec::new();
        for ti in 0..self.targets.len() {
            for (name, labels, o) in self.observed(ti, wall, mono) {
                if series.contains(&name)
                    && labels.get("namespace").map(String::as_str) == Some(namespace)
                    && reqs.iter().all(|r| r.matches(&labels))
                {
                    obs.push((labels, o));
                }
            }
        }
        let mut workloads: Vec<Workload> = Vec::new();
        for (_, o) in &obs {
            if let Some(w) = &self.targets[o.target].spec.workload {
                if !workloads.contains(w) {
                    workloads.push(w.clone());
                }
            }
        }
        let series_without_workload = workloads.is_empty() && !obs.is_empty();
        let mut unknown: Vec<(usize, bool)> = Vec::new();
        let mut named: Vec<Workload> = Vec::new();
        for (ti, t) in self.targets.iter().enumerate() {
            if Self::succeeded(t) || !could_be_in_scope(namespace, reqs, &t.spec.labels) {
                continue;
            }
            // With workloads known, a never-scraped pod of another workload is left out: it
            // keeps answers live when an unrelated pod fails for good.
            match &t.spec.workload {
                Some(_) if series_without_workload => {
                    unknown.push((ti, true));
                    continue;
                }
                Some(w) if !workloads.is_empty() && !workloads.contains(w) => continue,
                Some(w) if workloads.is_empty() && !named.contains(w) => named.push(w.clone()),
                _ => {}
            }
            unknown.push((ti, false));
        }
        let silent_static: Vec<usize> = (0..self.targets.len())
            .filter(|&ti| {
                let t = &self.targets[ti];
                t.spec.workload.is_none()
                    && Self::succeeded(t)
                    && surely_in_scope(namespace, reqs, &t.spec.labels)
                    && !obs.iter().any(|(_, o)| o.target == ti)
            })
            .collect();
        let silent: Vec<Workload> = workloads
            .iter()
            .filter(|w| {
                self.targets.iter().enumerate().any(|(ti, t)| {
                    t.spec.workload.as_ref() == Some(*w)
                        && Self::succeeded(t)
                        && !obs.iter().any(|(_, o)| o.target == ti)
                })
            })
            .cloned()
            .collect();
        if workloads.is_empty() {
            workloads = named;
        }
        Ev {
            obs,
            unknown,
            workloads,
            silent,
            silent_static,
        }
    }

    /// A query's evidence: for an Object query, the series that name the workload by their
    /// labels and, when the cluster lists pods, those of the workload's own pods.
    fn evidence(&self, q: &Query, series: &[String], wall: Ms, mono: Ms) -> Ev {
        let Some((kind, name)) = &q.object else {
            return self.scoped(&q.namespace, &q.selector, series, wall, mono);
        };
        let me: Workload = (kind.clone(), q.namespace.clone(), name.clone());
        let mut labelled = q.selector.clone();
        labelled.push(Req::Eq(KIND_LABEL.into(), kind.clone()));
        labelled.push(Req::Eq(NAME_LABEL.into(), name.clone()));
        let by_labels = self.scoped(&q.namespace, &labelled, series, wall, mono);
        let mut ev = Ev {
            obs: by_labels
                .obs
                .into_iter()
                .filter(|(labels, _)| labels.get(API_VERSION_LABEL).is_none_or(|v| v == "apps/v1"))
                .collect(),
            unknown: by_labels.unknown,
            workloads: vec![me.clone()],
            silent: by_labels.silent.into_iter().filter(|w| *w == me).collect(),
            silent_static: by_labels.silent_static,
        };
        let Some(pods) = self
            .cluster
            .as_ref()
            .and_then(|c| c.pods(&self.pod_list(), &q.namespace))
        else {
            return ev;
        };
        let owned = |pod: &str| pods.get(pod) == Some(&Some(me.clone()));
        let broad = self.scoped(&q.namespace, &q.selector, series, wall, mono);
        for (labels, o) in broad.obs {
            let own = labels.get("pod").is_some_and(|p| owned(p));
            let seen = ev
                .obs
                .iter()
                .any(|(l, e)| e.target == o.target && *l == labels && e.name == o.name);
            if own && !seen {
                ev.obs.push((labels, o));
            }
        }
        for (ti, bystander) in broad.unknown {
            let id = &self.targets[ti].spec.id;
            let own = id
                .strip_prefix(q.namespace.as_str())
                .and_then(|r| r.strip_prefix('/'))
                .is_some_and(owned);
            if own && !ev.unknown.iter().any(|(u, _)| *u == ti) {
                ev.unknown.push((ti, bystander));
            }
        }
        ev.silent = broad.silent.into_iter().filter(|w| *w == me).collect();
        ev
    }

    /// The pods the cluster knows: every target that is a pod of a workload, by its `pod`
    /// label.
    fn pod_list(&self) -> Vec<(String, String, Option<Workload>)> {
        self.targets
            .iter()
            .filter(|t| t.spec.workload.is_some())
            .filter_map(|t| {
                Some((
                    t.spec.labels.get("namespace")?.clone(),
                    t.spec.labels.get("pod")?.clone(),
                    t.spec.workload.clone(),
                ))
            })
            .collect()
    }

    /// A series out of order reads as unknown, never as stale.
    fn fresh(&self, o: &Observed) -> bool {
        o.out_of_order || o.age <= self.stale_after
    }

    /// Max over fresh series, never sum; unknown input that could be higher refuses, and a
    /// target never scraped could be. With an epoch label, see `newest_epoch`.
    fn recommendation(&self, ev: &Ev, epoch: Option<(&str, u64)>) -> Rule {
        let mut present = ev.present();
        if present.is_empty() {
            return Rule::Refused(
                if ev.unknown_to_all().next().is_none() {
                    Kind::NoMatch
                } else {
                    Kind::Partial
                },
                None,
            );
        }
        if let Some((label, step)) = epoch {
            let newest = match self.newest_epoch(ev, label, step) {
                Ok(newest) => newest,
                Err(kind) => return Rule::Refused(kind, None),
            };
            present = ev
                .obs
                .iter()
                .filter(|(labels, o)| o.present && epoch_in(labels, label) == Some(newest))
                .map(|(_, o)| o)
                .collect();
        }
        let fresh_valid: Vec<u64> = present
            .iter()
            .filter(|o| self.fresh(o) && !o.duplicated && !invalid(o.value))
            .map(|o| o.value as u64)
            .collect();
        let stale: Vec<&&Observed> = present.iter().filter(|o| !self.fresh(o)).collect();
        let invalid_fresh = present
            .iter()
            .any(|o| self.fresh(o) && (o.duplicated || invalid(o.value)));
        match fresh_valid.iter().max() {
            Some(&best) => {
                let stale_blocks = stale.iter().any(|o| o.last_valid.is_none_or(|v| v > best));
                if invalid_fresh || stale_blocks || ev.unknown_to_all().next().is_some() {
                    Rule::Refused(Kind::Partial, Some(best))
                } else {
                    Rule::Value(best)
                }
            }
            None if !stale.is_empty() => Rule::Refused(Kind::Stale, None),
            None => Rule::Refused(Kind::Invalid, None),
        }
    }

    /// The newest epoch among the exported series, once the evidence for it is unambiguous:
    /// every exported series has a readable epoch (else invalid); no series a target stopped
    /// exporting is of a newer epoch, and no target exports an older epoch than one it
    /// stopped exporting (else partial); and the newest is at most `step` above the newest
    /// older epoch still fresh (else partial).
    fn newest_epoch(&self, ev: &Ev, label: &str, step: u64) -> Result<u64, Kind> {
        let mut newest = 0;
        for (labels, _) in ev.obs.iter().filter(|(_, o)| o.present) {
            newest = newest.max(epoch_in(labels, label).ok_or(Kind::Invalid)?);
        }
        for (labels, o) in ev.obs.iter().filter(|(_, o)| !o.present) {
            let Some(gone) = epoch_in(labels, label) else {
                continue;
            };
            let went_back = ev.obs.iter().any(|(l, p)| {
                p.present && p.target == o.target && epoch_in(l, label).is_some_and(|e| e < gone)
            });
            if gone > newest || went_back {
                return Err(Kind::Partial);
            }
        }
        let next = ev
            .obs
            .iter()
            .filter(|(_, o)| o.present && self.fresh(o))
            .filter_map(|(labels, _)| epoch_in(labels, label))
            .filter(|e| *e < newest)
            .max();
        if next.is_some_and(|n| newest - n > step) {
            return Err(Kind::Partial);
        }
        Ok(newest)
    }

    /// The targets whose series of the newest epoch decide a fenced recommendation: only
    /// their gate and current series count. None when no epoch decides.
    fn deciding(&self, q: &Query, name: &str, wall: Ms, mono: Ms) -> Option<Vec<usize>> {
        let Some(Metric::Recommendation {
            series,
            epoch_label: Some(label),
            epoch_step,
            ..
        }) = self.metrics.get(name)
        else {
            return None;
        };
        let ev = self.evidence(q, series, wall, mono);
        let Ok(newest) = self.newest_epoch(&ev, label, *epoch_step) else {
            return Some(Vec::new());
        };
        Some(
            ev.obs
                .iter()
                .filter(|(l, o)| o.present && epoch_in(l, label) == Some(newest))
                .map(|(_, o)| o.target)
                .collect(),
        )
    }

    /// The highest retained index; a pod in scope that never reported a valid one leaves it
    /// incomplete.
    fn floor(&self, ev: &Ev) -> Rule {
        if let Some(c) = &self.cluster {
            if ev.workloads.iter().any(|w| c.unresolved.contains(w)) {
                return Rule::Refused(Kind::IncompleteFloor, None);
            }
            let opted = ev.workloads.iter().any(|w| c.opted_in.contains(w));
            match ev.workloads.as_slice() {
                [w] if opted => return self.deployment_floor(c, ev, w),
                // An opted-in Deployment's count covers its own pods only.
                [_, _, ..] if opted => return Rule::Refused(Kind::IncompleteFloor, None),
                _ => {}
            }
        }
        let retained = |o: &Observed| if o.duplicated { None } else { o.last_valid };
        let best = ev.obs.iter().filter_map(|(_, o)| retained(o)).max();
        let never_valid = ev.obs.iter().any(|(_, o)| retained(o).is_none());
        let start = match (&self.cluster, ev.workloads.as_slice()) {
            (Some(c), [w]) => c.ordinals_start(w),
            _ => 0,
        };
        let offset = |v: u64| v.saturating_sub(start);
        if !ev.unknown.is_empty()
            || never_valid
            || !ev.silent.is_empty()
            || !ev.silent_static.is_empty()
        {
            Rule::Refused(Kind::IncompleteFloor, best.map(offset))
        } else if let Some(b) = best {
            Rule::Value(offset(b))
        } else {
            Rule::Refused(Kind::NoMatch, None)
        }
    }

    /// An opted-in Deployment: how many of its pods hold state, complete only while every
    /// pod's index is fresh and valid and its cost annotation says the same (absent is 0),
    /// every holding pod is Ready, one ReplicaSet holds them all, the ReplicaSets are known,
    /// exactly one has replicas (pods or not) and it is the pods' own, no series in scope
    /// comes from elsewhere and no target in scope is unscraped.
    fn deployment_floor(&self, c: &ClusterFacts, ev: &Ev, w: &Workload) -> Rule {
        let Some(pods) = c.pods(&self.pod_list(), &w.1) else {
            return Rule::Refused(Kind::IncompleteFloor, None);
        };
        let members: Vec<&String> = pods
            .iter()
            .filter(|(_, pw)| pw.as_ref() == Some(w))
            .map(|(p, _)| p)
            .collect();
        let mut incomplete = !ev.unknown.is_empty();
        let mut index: BTreeMap<&str, Option<u64>> = BTreeMap::new();
        for (labels, o) in &ev.obs {
            let Some(pod) = labels.get("pod").filter(|p| members.contains(p)) else {
                incomplete = true;
                continue;
            };
            let v = (o.present && self.fresh(o) && !o.duplicated && !invalid(o.value))
                .then_some(o.value as u64);
            let slot = index.entry(pod.as_str()).or_insert(v);
            *slot = slot.zip(v).map(|(a, b)| a.max(b));
        }
        let mut holding = 0;
        let mut replica_sets = Vec::new();
        for pod in &members {
            let state = c.pod_state.get(*pod).cloned().unwrap_or_default();
            match index.get(pod.as_str()).copied().flatten() {
                None => incomplete = true,
                Some(i) => {
                    if i > 0 {
                        holding += 1;
                        incomplete |= !state.ready;
                    }
                    // The ReplicaSet controller reads an absent or invalid cost (a plus sign,
                    // a leading zero, not an int32) as 0.
                    let cost = state
                        .cost
                        .as_deref()
                        .filter(|t| {
                            t.starts_with('-')
                                || *t == "0"
                                || t.starts_with(|c: char| ('1'..='9').contains(&c))
                        })
                        .and_then(|t| t.parse::<i32>().ok())
                        .unwrap_or(0);
                    incomplete |= i64::from(cost) != i as i64;
                }
            }
            if !replica_sets.contains(&state.replica_set) {
                replica_sets.push(state.replica_set);
            }
        }
        let with_replicas: Vec<&String> = c.replica_sets.get(w).map_or(Vec::new(), |sets| {
            sets.iter()
                .filter(|(_, r)| **r > 0)
                .map(|(name, _)| name)
                .collect()
        });
        incomplete |= !c.replica_sets_known || with_replicas.len() > 1;
        // The one ReplicaSet with replicas must be the pods' own.
        if let [Some(of_pods)] = &replica_sets[..] {
            incomplete |= with_replicas.first().is_none_or(|only| *only != of_pods);
        }
        if incomplete || replica_sets.len() > 1 {
            Rule::Refused(Kind::IncompleteFloor, Some(holding))
        } else if members.is_empty() {
            Rule::Refused(Kind::NoMatch, None)
        } else {
            Rule::Value(holding)
        }
    }

    /// The current replica count from `series`: the max over fresh valid series, of the
    /// `deciding` targets alone when given; unknown while a target never scraped could hold
    /// a higher one.
    fn current_from_series(
        &self,
        q: &Query,
        series: &str,
        deciding: Option<&[usize]>,
        wall: Ms,
        mono: Ms,
    ) -> Option<u64> {
        let ev = self.evidence(q, &[series.to_string()], wall, mono);
        if ev.unknown_to_all().next().is_some() {
            return None;
        }
        ev.obs
            .iter()
            .map(|(_, o)| o)
            .filter(|o| deciding.is_none_or(|d| d.contains(&o.target)))
            .filter(|o| o.present && self.fresh(o) && !o.duplicated && !invalid(o.value))
            .map(|o| o.value as u64)
            .max()
    }

    /// A recommender's current count: spec.replicas when its evidence belongs to one known
    /// workload, else its `currentSeries`. A workload missing from the cluster's cache is
    /// unknown, unless a `currentSeries` says it.
    fn current_of(
        &self,
        name: &str,
        q: &Query,
        workloads: &[Workload],
        wall: Ms,
        mono: Ms,
    ) -> Option<u64> {
        let current_series = match self.metrics.get(name) {
            Some(Metric::Recommendation { current_series, .. }) => current_series.as_deref(),
            _ => None,
        };
        if let (Some(c), [w]) = (&self.cluster, workloads) {
            if let Some(v) = c.replicas(w) {
                return Some(v);
            }
            current_series?;
        }
        let deciding = self.deciding(q, name, wall, mono);
        self.current_from_series(q, current_series?, deciding.as_deref(), wall, mono)
    }

    /// spec.replicas of the one workload behind a floor's pods.
    fn current_of_floor(&self, floor: Option<&str>, q: &Query, wall: Ms, mono: Ms) -> Option<u64> {
        let cluster = self.cluster.as_ref()?;
        let Some(Metric::Floor { series }) = self.metrics.get(floor?) else {
            return None;
        };
        match self.evidence(q, series, wall, mono).workloads.as_slice() {
            [w] => cluster.replicas(w),
            _ => None,
        }
    }

    /// A gate holds when every in-scope series of it (of the `deciding` targets alone, when
    /// given) is fresh and equal to its value, at least one exists, and no target that might
    /// hold one is unknown.
    fn gate_open(
        &self,
        q: &Query,
        series: &str,
        equals: f64,
        deciding: Option<&[usize]>,
        wall: Ms,
        mono: Ms,
    ) -> bool {
        let ev = self.evidence(q, &[series.to_string()], wall, mono);
        let mut present = ev.present();
        present.retain(|o| deciding.is_none_or(|d| d.contains(&o.target)));
        ev.unknown_to_all().next().is_none()
            && !present.is_empty()
            && present
                .iter()
                .all(|o| self.fresh(o) && !o.duplicated && o.value == equals)
    }

    fn input(&self, name: &str, q: &Query, wall: Ms, mono: Ms) -> Rule {
        match self.metrics.get(name) {
            Some(Metric::Recommendation {
                series,
                gate,
                epoch_label,
                epoch_step,
                ..
            }) => {
                let ev = self.evidence(q, series, wall, mono);
                let epoch = epoch_label.as_deref().map(|l| (l, *epoch_step));
                let answer = self.recommendation(&ev, epoch);
                let Some((gate_series, equals)) = gate else {
                    return answer;
                };
                let deciding = self.deciding(q, name, wall, mono);
                if self.gate_open(q, gate_series, *equals, deciding.as_deref(), wall, mono) {
                    return answer;
                }
                let Some(v) = answer.value() else {
                    return answer;
                };
                match self.current_of(name, q, &ev.workloads, wall, mono) {
                    Some(c) => Rule::Value(v.max(c)),
                    None => Rule::Refused(Kind::GateClosed, Some(v)),
                }
            }
            Some(Metric::Floor { series }) => self.floor(&self.evidence(q, series, wall, mono)),
            Some(Metric::Target { inputs, floor }) => {
                self.target(inputs, floor.as_deref(), q, wall, mono)
            }
            None => Rule::Refused(Kind::NoMatch, None),
        }
    }

    fn target(
        &self,
        inputs: &[String],
        floor: Option<&str>,
        q: &Query,
        wall: Ms,
        mono: Ms,
    ) -> Rule {
        let parts: Vec<Rule> = inputs
            .iter()
            .map(|i| self.input(i, q, wall, mono))
            .collect();
        let rec = if parts.len() == 1 {
            parts[0].clone()
        } else {
            let best = parts.iter().filter_map(Rule::value).max();
            let first_refusal = parts.iter().find_map(Rule::kind);
            match (best, first_refusal) {
                (Some(v), None) => Rule::Value(v),
                (None, k) => Rule::Refused(k.unwrap_or(Kind::NoMatch), None),
                (Some(v), Some(k)) => {
                    // An input without a value blocks a decrease: hold at the current count,
                    // from the floor's workload, else from any input that knows it.
                    let current = self.current_of_floor(floor, q, wall, mono).or_else(|| {
                        inputs.iter().find_map(|i| {
                            let workloads = match self.metrics.get(i) {
                                Some(Metric::Recommendation { series, .. }) => {
                                    self.evidence(q, series, wall, mono).workloads
                                }
                                _ => Vec::new(),
                            };
                            self.current_of(i, q, &workloads, wall, mono)
                        })
                    });
                    match current {
                        Some(c) => Rule::Value(v.max(c)),
                        None => Rule::Refused(k, Some(v)),
                    }
                }
            }
        };
        let Some(r) = rec.value() else {
            return Rule::Refused(rec.kind().unwrap_or(Kind::NoMatch), None);
        };
        let Some(floor_name) = floor else {
            return Rule::Value(r);
        };
        match self.input(floor_name, q, wall, mono) {
            Rule::Value(f) => Rule::Value(r.max(f)),
            // An incomplete floor, or one with no series at all (a workload at zero), holds at
            // what is known, and at the current count.
            Rule::Refused(k @ (Kind::IncompleteFloor | Kind::NoMatch), known) => {
                match self.current_of_floor(floor, q, wall, mono) {
                    Some(c) => Rule::Value(r.max(known.unwrap_or(0)).max(c)),
                    None => Rule::Refused(k, Some(r)),
                }
            }
            Rule::Refused(k, _) => Rule::Refused(k, Some(r)),
        }
    }

    /// The answer a fresh computation over everything that happened gives.
    pub fn answer(&self, q: &Query, wall: Ms, mono: Ms) -> Outcome {
        if !self.metrics.contains_key(&q.metric) {
            return Outcome::Unknown;
        }
        match self.input(&q.metric, q, wall, mono) {
            Rule::Value(v) => Outcome::Value(v),
            Rule::Refused(k, _) => Outcome::Refused(k),
        }
    }
}
