//! The simulation loop: scrape rounds and HPA syncs on a simulated clock, pods following the
//! HPA's decisions, adapter restarts, and the final analysis.

use super::*;

pub(super) struct Runner {
    pub(super) scenario: Scenario,
    pub(super) config: Config,
    pub(super) clock: Arc<ManualClock>,
    pub(super) workload_state: Option<Arc<SimWorkload>>,
    pub(super) instance: AdapterInstance,
    pub(super) controllers: Vec<ControllerRun>,
    pub(super) pods: BTreeMap<u32, Pod>,
    pub(super) hpa: Hpa,
    pub(super) spec_replicas: i32,
    pub(super) stale_after: Millis,
    pub(super) interval: Millis,
    /// (time, max live recommendation value, true floor) at every event, for the inflation bound.
    pub(super) bound_history: Vec<(Millis, i64)>,
    pub(super) report: Report,
    pub(super) episode: Option<Convergence>,
    /// The (start, target) of the last finished episode, so it is not reopened.
    pub(super) closed: Option<(Millis, i64)>,
    pub(super) healthy_since: Option<Millis>,
    pub(super) target_changed_at: Millis,
    pub(super) last_target: Option<i64>,
    pub(super) threshold: Option<ThresholdTruth>,
    /// (scrape time, exported load total).
    pub(super) load_history: Vec<(Millis, f64)>,
    /// The last scale event: (time, up?).
    pub(super) last_scale: Option<(Millis, bool)>,
    /// The adapter's `epochLabel` on the recommendation, if it fences by leader epoch.
    pub(super) epoch_label: Option<String>,
    /// Since when the workload has been at 0 replicas while its controllers ask for more.
    pub(super) zero_wanted_since: Option<Millis>,
    /// The workload is a Deployment: its ReplicaSets.
    pub(super) deployment: Option<SimDeployment>,
}

/// Runs a scenario to its end.
pub async fn run(scenario: Scenario) -> Result<Report, SimulateError> {
    let config = scenario.adapter_config()?;
    let controller_config = scenario.kubernetes.controller_config()?;
    let hpa = Hpa::new(scenario.hpa.clone(), controller_config)
        .map_err(|e| invalid("hpa", e.to_string()))?;
    let clock = Arc::new(ManualClock::new(EPOCH_MS));
    let is_deployment = scenario.workload.kind == "Deployment";
    let workload_state = scenario.workload.discovery.then(|| {
        Arc::new(SimWorkload {
            spec_replicas: AtomicI64::new(i64::from(scenario.workload.initial_replicas)),
            pods: Mutex::new(None),
            replica_sets: Mutex::new(None),
            deletion_cost_opt_in: scenario
                .workload
                .deletion_cost
                .as_ref()
                .is_some_and(|c| c.opt_in),
        })
    });
    let gates = RankingGates::for_kube_minor(scenario.kubernetes.minor()?);
    let deployment = is_deployment.then(|| SimDeployment::new(&scenario.workload, gates));
    let instance =
        AdapterInstance::start(config.clone(), clock.clone(), workload_state.clone()).await?;
    let mut controllers = Vec::new();
    for c in &scenario.controllers {
        controllers.push(ControllerRun {
            spec: c.clone(),
            exporter: Exporter::start().await?,
            delivered: Delivered::default(),
        });
    }
    let stale_after = config.scrape.stale_after().as_millis() as Millis;
    let interval = config.scrape.interval.0.as_millis() as Millis;
    let mut faults: Vec<FaultPeriod> = scenario
        .faults
        .iter()
        .map(|f| FaultPeriod {
            from: ms(f.from),
            to: ms(f.to),
            label: format!(
                "{} {:?}{}",
                f.target,
                f.mode,
                f.flap
                    .map(|d| format!(" flapping every {}", fmt_t(ms(d))))
                    .unwrap_or_default()
            )
            .to_lowercase(),
        })
        .collect();
    faults.sort_by_key(|f| f.from);
    let report = Report {
        name: scenario.name.clone(),
        description: scenario.description.clone(),
        duration: ms(scenario.duration),
        metric_names: scenario
            .hpa
            .metrics
            .iter()
            .filter_map(|m| match (&m.external, &m.object) {
                (Some(e), _) => Some(e.metric.name.clone()),
                (None, Some(o)) => Some(o.metric.name.clone()),
                (None, None) => None,
            })
            .collect(),
        initial_replicas: scenario.workload.initial_replicas,
        rows: Vec::new(),
        violations: Vec::new(),
        convergences: Vec::new(),
        expectations: Vec::new(),
        faults,
        restarts: scenario.adapter_restarts.iter().map(|d| ms(*d)).collect(),
        scrape_rounds: 0,
        https_requests: 0,
        threshold_notes: Vec::new(),
        threshold_checked: false,
        zero_checked: scenario.hpa.min_replicas() == 0,
        deployment_checked: is_deployment,
        pod_notes: Vec::new(),
    };
    let threshold = scenario
        .load
        .as_ref()
        .and_then(|l| ThresholdTruth::from_config(&config, l));
    let epoch_label = truth::epoch_label(&config);
    let mut runner = Runner {
        epoch_label,
        spec_replicas: scenario.workload.initial_replicas,
        scenario,
        config,
        clock,
        workload_state,
        instance,
        controllers,
        pods: BTreeMap::new(),
        hpa,
        stale_after,
        interval,
        bound_history: Vec::new(),
        report,
        episode: None,
        closed: None,
        healthy_since: None,
        target_changed_at: 0,
        last_target: None,
        threshold,
        load_history: Vec::new(),
        last_scale: None,
        zero_wanted_since: None,
        deployment,
    };
    runner.report.threshold_checked = threshold.is_some();
    for ordinal in 0..runner.spec_replicas.max(0) as u32 {
        // Initial pods have been Ready for long.
        runner.add_pod(ordinal, Millis::MIN / 4, 0).await?;
    }
    runner.advance_deployment(0).await?;
    runner.sync_targets(0);
    runner.run_loop().await?;
    runner.finish();
    Ok(runner.report)
}

impl Runner {
    pub(super) fn workload(&self) -> &WorkloadSpec {
        &self.scenario.workload
    }

    pub(super) async fn add_pod(
        &mut self,
        ordinal: u32,
        created_at: Millis,
        replica_set: usize,
    ) -> Result<(), SimulateError> {
        let exporter = Exporter::start().await?;
        self.pods.insert(
            ordinal,
            Pod {
                ordinal,
                created_at,
                exporter,
                above_since: None,
                truth_index: 0,
                delivered: Delivered::default(),
                replica_set,
                uid: pod_uid(self.scenario.seed, ordinal),
                cost: None,
                cost_pending: None,
            },
        );
        Ok(())
    }

    pub(super) fn controller_live(c: &ControllerSpec, t: Millis) -> bool {
        c.from.is_none_or(|f| ms(f) <= t) && c.until.is_none_or(|u| t < ms(u))
    }

    /// Live, and for a controller inside the workload, hosted by a Ready pod
    /// (docs/hpa-behaviour.md §7.3).
    pub(super) fn controller_running(&self, c: &ControllerSpec, t: Millis) -> bool {
        let w = &self.scenario.workload;
        Self::controller_live(c, t) && (!c.in_workload || self.pods.values().any(|p| p.ready(w, t)))
    }

    /// The adapter's targets: live controllers and existing pods, as discovery would list them.
    pub(super) fn sync_targets(&self, t: Millis) {
        let ns = &self.scenario.namespace;
        let w = self.workload();
        let mut targets = Vec::new();
        for c in &self.controllers {
            if self.controller_running(&c.spec, t) {
                targets.push(ScrapeTarget {
                    format: Default::default(),
                    id: TargetId(format!("{ns}/{}", c.spec.name).into()),
                    url: c.exporter.url.clone(),
                    labels: [
                        ("namespace".to_string(), ns.clone()),
                        ("pod".to_string(), c.spec.name.clone()),
                    ]
                    .into_iter()
                    .collect(),
                    workload: None,
                });
            }
        }
        for p in self.pods.values() {
            let name = p.name(&w.name);
            targets.push(ScrapeTarget {
                format: Default::default(),
                id: TargetId(format!("{ns}/{name}").into()),
                url: p.exporter.url.clone(),
                labels: [
                    ("namespace".to_string(), ns.clone()),
                    ("pod".to_string(), name),
                ]
                .into_iter()
                .collect(),
                workload: w.discovery.then(|| WorkloadRef {
                    kind: w.kind.as_str().into(),
                    namespace: ns.clone(),
                    name: w.name.clone(),
                }),
            });
        }
        self.instance.targets.set_targets(targets);
    }

    /// This workload's controllers exporting at `t` (live and not dropping the series); a
    /// namesake workload's controller is never part of the ground truth.
    pub(super) fn exporting_controllers(
        &self,
        t: Millis,
    ) -> impl Iterator<Item = &ControllerRun> + '_ {
        self.controllers.iter().filter(move |c| {
            c.spec.recommends_for(&self.scenario.workload)
                && self.controller_running(&c.spec, t)
                && self
                    .scenario
                    .fault_at(&c.spec.name, false, t)
                    .is_none_or(|f| f.mode != FaultMode::Absent)
        })
    }

    /// Ground truth: the max of every exporting controller's valid value (docs/hpa-behaviour.md §4.1:
    /// duplicates are max-ed, never summed). With the recommendation fenced by an epoch label,
    /// only the controllers of the newest epoch lead; an unreadable epoch leaves it unknown.
    pub(super) fn truth_recommendation(&self, t: Millis) -> Option<i64> {
        let value =
            |c: &ControllerRun| step_value(&c.spec.values, t).and_then(SampleValue::replicas);
        let Some(label) = &self.epoch_label else {
            return self.exporting_controllers(t).filter_map(value).max();
        };
        let epoch = |c: &ControllerRun| c.spec.labels.get(label)?.parse::<u64>().ok();
        let mut epochs = Vec::new();
        for c in self.exporting_controllers(t) {
            epochs.push((epoch(c)?, c));
        }
        let newest = epochs.iter().map(|(e, _)| *e).max()?;
        epochs
            .into_iter()
            .filter(|(e, _)| *e == newest)
            .filter_map(|(_, c)| value(c))
            .max()
    }

    /// The count the workload must keep: a StatefulSet its highest index (it removes the highest
    /// ordinals first), a Deployment the number of pods that hold state (its ReplicaSets choose
    /// which go, docs/hpa-behaviour.md §9).
    pub(super) fn truth_floor(&self) -> i64 {
        if self.deployment.is_some() {
            return self.holders().count() as i64;
        }
        self.pods.values().map(|p| p.truth_index).max().unwrap_or(0)
    }

    /// Moves the pods' drain clocks and true indices to `t`.
    pub(super) fn advance_pods(&mut self, t: Millis) {
        let rec = self.truth_recommendation(t);
        let w = self.scenario.workload.clone();
        for p in self.pods.values_mut() {
            if let Some(rec) = rec {
                if i64::from(p.ordinal) + 1 > rec {
                    p.above_since.get_or_insert(t);
                } else {
                    p.above_since = None;
                }
            }
            if let Some(v) = p.index_at(&w, t).replicas() {
                p.truth_index = v;
            }
        }
        let target = self.truth_target(rec);
        if target != self.last_target {
            self.last_target = target;
            self.target_changed_at = t;
        }
        let bound = rec.unwrap_or(0).max(self.truth_floor());
        let any_value = self
            .exporting_controllers(t)
            .filter_map(|c| step_value(&c.spec.values, t).and_then(SampleValue::replicas))
            .chain(std::iter::once(bound))
            .max()
            .unwrap_or(0);
        self.bound_history.push((t, any_value));
    }

    pub(super) fn page_for(&self, fault: Option<&FaultSpec>, series: &str, body: String) -> Page {
        match fault.map(|f| (f.mode, f.delay)) {
            None => Page::Ok(body),
            Some((FaultMode::Down, _)) => Page::Down,
            Some((FaultMode::Error, _)) => Page::Status(500),
            Some((FaultMode::Garbage, _)) => Page::Ok(garbage_page(series)),
            Some((FaultMode::Absent, _)) => Page::Ok("# nothing exported\n".into()),
            Some((FaultMode::NotReady | FaultMode::Rollout | FaultMode::Frozen, _)) => {
                Page::Ok(body)
            }
            Some((FaultMode::Slow, delay)) => Page::Slow(
                body,
                delay
                    .map(|d| d.0)
                    .unwrap_or(self.config.scrape.timeout() * 5),
            ),
        }
    }

    /// Sets every exporter's page for `t`, scrapes once through the real scraper, and records
    /// what a healthy scrape could have delivered (ground truth).
    pub(super) async fn scrape(&mut self, t: Millis) {
        let w = self.scenario.workload.clone();
        for i in 0..self.controllers.len() {
            let c = &self.controllers[i];
            let running = self.controller_running(&c.spec, t);
            let fault = self.scenario.fault_at(&c.spec.name, false, t).cloned();
            // A stuck loop serves what it evaluated at the freeze, as of then.
            let evaluated = match &fault {
                Some(f) if f.mode == FaultMode::Frozen => ms(f.from),
                _ => t,
            };
            let value = step_value(&c.spec.values, evaluated).cloned();
            let stamp = c
                .spec
                .timestamp_series
                .as_deref()
                .map(|series| (series, (EPOCH_MS + evaluated) as f64 / 1000.0));
            let body = match &value {
                Some(v) => expect_page(
                    c.spec.kind_label(&w),
                    &w.name,
                    &c.spec.name,
                    &c.spec.labels,
                    &v.exposition(),
                    stamp,
                ),
                None => "# no value yet\n".into(),
            };
            let page = self.page_for(fault.as_ref(), "hpa_expect_replicas", body);
            c.exporter.set(page);
            let delivered = fault.as_ref().is_none_or(|f| f.mode == FaultMode::Frozen);
            if delivered && running {
                if let Some(v) = value {
                    let d = &mut self.controllers[i].delivered;
                    d.ever_valid |= v.replicas().is_some();
                    d.last = Some((evaluated, v));
                }
            }
        }
        let ordinals: Vec<u32> = self.pods.keys().copied().collect();
        // The load goes to the Ready pods, evenly; the others carry none (docs/hpa-behaviour.md §4.2).
        let ready = self.pods.values().filter(|p| self.pod_ready(p, t)).count();
        let total = self.scenario.load.as_ref().map(|l| l.exported(t));
        if let Some(v) = total {
            self.load_history.push((t, v));
        }
        for o in ordinals {
            let p = &self.pods[&o];
            let name = p.name(&w.name);
            let fault = self.scenario.fault_at(&name, true, t).cloned();
            let value = p.index_at(&w, t);
            let mut body = index_page(&w, &name, &value.exposition());
            if let (Some(l), Some(v)) = (&self.scenario.load, total) {
                let share = if self.pod_ready(p, t) && ready > 0 {
                    v / ready as f64
                } else {
                    0.0
                };
                body.push_str(&load_line(&l.series, &w, &name, share));
            }
            let page = self.page_for(fault.as_ref(), "hpa_stateful_index", body);
            p.exporter.set(page);
            if fault.is_none() {
                if let Some(p) = self.pods.get_mut(&o) {
                    p.delivered.ever_valid |= value.replicas().is_some();
                    p.delivered.last = Some((t, value));
                    if total.is_some() {
                        p.delivered.load_at = Some(t);
                    }
                }
            }
        }
        self.instance.scraper.scrape_round().await;
        self.instance.ready.mark();
        self.report.scrape_rounds += 1;
    }

    /// The adapter process restarts: a new store (retained indices lost, every target
    /// unscraped), a new serving certificate and port. The HPA continues.
    pub(super) async fn restart_adapter(&mut self, t: Millis) -> Result<(), SimulateError> {
        let instance = AdapterInstance::start(
            self.config.clone(),
            self.clock.clone(),
            self.workload_state.clone(),
        )
        .await?;
        self.instance = instance;
        for c in &mut self.controllers {
            c.delivered = Delivered::default();
        }
        for p in self.pods.values_mut() {
            p.delivered = Delivered::default();
        }
        self.sync_targets(t);
        Ok(())
    }

    /// Ground truth: the inputs needed for scale-in the adapter cannot know at `t`.
    pub(super) fn unknown_inputs(&self, t: Millis) -> Vec<String> {
        let mut unknown = Vec::new();
        let mut exporting = 0;
        for c in self.exporting_controllers(t) {
            exporting += 1;
            let name = &c.spec.name;
            match &c.delivered.last {
                None => unknown.push(format!("{name} never scraped")),
                Some((at, _)) if t - at > self.stale_after => {
                    unknown.push(format!("{name} stale {}", fmt_t(t - at)))
                }
                Some((_, v)) if v.replicas().is_none() => {
                    unknown.push(format!("{name} invalid {}", v.exposition()))
                }
                Some(_) => {}
            }
        }
        // A load-driven scenario without controllers has no recommendation to miss.
        if exporting == 0 && !(self.scenario.load.is_some() && self.controllers.is_empty()) {
            unknown.push("recommendation missing".into());
        }
        if self.scenario.load.is_some() {
            let w = &self.scenario.workload.name;
            for p in self.pods.values() {
                match p.delivered.load_at {
                    None => unknown.push(format!("{} load never scraped", p.name(w))),
                    Some(at) if t - at > self.stale_after => {
                        unknown.push(format!("{} load stale {}", p.name(w), fmt_t(t - at)))
                    }
                    Some(_) => {}
                }
            }
        }
        let w = &self.scenario.workload.name;
        let incomplete: Vec<String> = self
            .pods
            .values()
            .filter(|p| !p.delivered.ever_valid)
            .map(|p| p.name(w))
            .collect();
        if !incomplete.is_empty() {
            unknown.push(format!("floor incomplete ({})", incomplete.join(",")));
        }
        unknown.extend(self.deployment_hazards(t));
        unknown
    }

    pub(super) fn truth_target(&self, rec: Option<i64>) -> Option<i64> {
        let spec = self.hpa.spec();
        rec.map(|r| {
            r.max(self.truth_floor())
                .clamp(i64::from(spec.min_replicas()), i64::from(spec.max_replicas))
        })
    }

    pub(super) async fn sync(&mut self, t: Millis) -> Result<(), SimulateError> {
        let ns = self.scenario.namespace.clone();
        let mut inputs = Vec::new();
        let mut answers = Vec::new();
        for m in &self.scenario.hpa.metrics {
            let (metric, object) = match (&m.external, &m.object) {
                (Some(ext), _) => (&ext.metric, None),
                (None, Some(obj)) => (&obj.metric, Some(&obj.described_object)),
                (None, None) => {
                    inputs.push(Err("only External and Object metrics are simulated".into()));
                    answers.push("not simulated".into());
                    continue;
                }
            };
            let selector = match metric.selector.as_ref().map(|s| s.to_query()) {
                None => None,
                Some(Ok(text)) => text,
                // The API server would have rejected the HPA; the metric cannot be fetched.
                Some(Err(e)) => {
                    inputs.push(Err(e.to_string()));
                    answers.push(format!("invalid selector: {e}"));
                    continue;
                }
            };
            let got = match object {
                None => {
                    self.instance
                        .fetch(&ns, &metric.name, selector.as_deref())
                        .await
                }
                Some(described) => {
                    self.instance
                        .fetch_object(&ns, described, &metric.name, selector.as_deref())
                        .await
                }
            };
            self.report.https_requests += 1;
            answers.push(match &got {
                Ok(items) => {
                    let sum: f64 = items.iter().sum();
                    if items.len() == 1 {
                        format!("{sum}")
                    } else {
                        format!("{sum} ({} items)", items.len())
                    }
                }
                Err(e) => short_error(e),
            });
            inputs.push(got);
        }
        let pods = self.pods.len() as i32;
        let ready = self.pods.values().filter(|p| self.pod_ready(p, t)).count() as i32;
        let input = SyncInput {
            spec_replicas: self.spec_replicas,
            status_replicas: pods,
            ready_pods: ready,
            pods,
            metrics: inputs,
            selector: Default::default(),
        };
        let outcome = self.hpa.sync(Duration::from_millis(t as u64), &input);

        let mut unknown = self.unknown_inputs(t);
        // With a load scenario every input is ground truth, so a refusal while all of them are
        // known is the adapter's fault (docs/hpa-behaviour.md §1.6: a refusal freezes scale-in).
        if self.scenario.load.is_some() && unknown.is_empty() {
            for (i, a) in input.metrics.iter().enumerate() {
                if let Err(e) = a {
                    let name = self.report.metric_names.get(i).cloned().unwrap_or_default();
                    self.violation(
                        "refusal",
                        t,
                        format!("{name} refused while every pod's load was fresh: {e}"),
                    );
                }
            }
        }
        for (i, a) in input.metrics.iter().enumerate() {
            if a.is_err() {
                let name = self.report.metric_names.get(i).cloned().unwrap_or_default();
                unknown.push(format!("{name} refused"));
            }
        }
        let rec = self.truth_recommendation(t);
        let floor = self.truth_floor();
        let target = self.truth_target(rec);
        self.check_invariants(t, &outcome, &unknown, floor);
        self.check_flap(t, &outcome);
        self.track_convergence(t, &outcome, unknown.is_empty(), target);
        self.check_scale_from_zero(t, &outcome);
        let load = self.load_history.last().map(|(_, v)| *v);
        let band = self
            .threshold
            .zip(load)
            .map(|(th, v)| (ceil_div(v, th.up), ceil_div(v, th.down)));
        let served = input
            .metrics
            .first()
            .and_then(|m| m.as_ref().ok())
            .map(|items| items.iter().sum());

        self.report.rows.push(SyncRow {
            t,
            spec_replicas: self.spec_replicas,
            status_replicas: pods,
            ready_pods: ready,
            truth_recommendation: rec,
            truth_floor: floor,
            truth_target: target,
            unknown,
            answers,
            proposal: outcome.metric_replicas,
            replicas: outcome.replicas,
            decision: decision_text(&outcome.decision),
            load,
            band,
            served,
        });
        if outcome.replicas != self.spec_replicas {
            self.scale_to(outcome.replicas, t).await?;
        }
        Ok(())
    }

    /// StatefulSet semantics: pods 0..N-1 exist; scale-in removes the highest ordinals. A
    /// Deployment passes the count to its ReplicaSets.
    pub(super) async fn scale_to(&mut self, replicas: i32, t: Millis) -> Result<(), SimulateError> {
        if self.deployment.is_some() {
            self.scale_deployment(replicas, t).await?;
        } else {
            let n = replicas.max(0) as u32;
            self.pods.retain(|o, _| *o < n);
            for o in 0..n {
                if !self.pods.contains_key(&o) {
                    self.add_pod(o, t, 0).await?;
                }
            }
        }
        self.spec_replicas = replicas;
        if let Some(w) = &self.workload_state {
            w.spec_replicas.store(i64::from(replicas), Ordering::SeqCst);
        }
        self.sync_targets(t);
        Ok(())
    }

    pub(super) async fn run_loop(&mut self) -> Result<(), SimulateError> {
        let end = ms(self.scenario.duration);
        let sync = SYNC_PERIOD.as_millis() as Millis;
        let mut next_scrape: Millis = 0;
        let mut next_sync: Millis = sync;
        let mut restarts: Vec<Millis> = self.report.restarts.clone();
        restarts.sort();
        restarts.reverse();
        let mut live: Vec<bool> = self
            .controllers
            .iter()
            .map(|c| self.controller_running(&c.spec, 0))
            .collect();
        loop {
            let next_restart = restarts.last().copied().unwrap_or(Millis::MAX);
            let t = next_scrape.min(next_sync).min(next_restart);
            if t > end {
                break;
            }
            self.clock.set(EPOCH_MS + t);
            self.advance_pods(t);
            self.advance_deployment(t).await?;
            let now_live: Vec<bool> = self
                .controllers
                .iter()
                .map(|c| self.controller_running(&c.spec, t))
                .collect();
            if now_live != live {
                live = now_live;
                self.sync_targets(t);
            }
            if t == next_restart {
                restarts.pop();
                self.restart_adapter(t).await?;
                // `serve` scrapes once at startup, before the first tick.
                self.scrape(t).await;
                if next_scrape == t {
                    next_scrape += self.interval;
                }
                continue;
            }
            if t == next_scrape {
                self.scrape(t).await;
                next_scrape += self.interval;
            }
            if t == next_sync {
                self.sync(t).await?;
                next_sync += sync;
            }
        }
        Ok(())
    }

    /// How far behind the clean load the replicas are at the sync of `row`: 0 when they cover
    /// `ceil(V(t)/upPerReplica)` (within the HPA's and the threshold's bounds), else how long
    /// ago the clean load last needed no more than the replicas there are.
    pub(super) fn overload_lag(
        &self,
        th: &ThresholdTruth,
        load: &LoadSpec,
        t: Millis,
        replicas: i32,
    ) -> Millis {
        let cap = th
            .max
            .min(i64::from(self.hpa.spec().max_replicas))
            .max(th.min);
        let need = |s: Millis| ceil_div(load.clean(s), th.up).clamp(th.min, cap);
        let n = i64::from(replicas);
        let mut s = t;
        while s > 0 && need(s) > n {
            s -= 1000;
        }
        t - s.max(0)
    }

    /// Threshold scenarios: reversals, the overload lag, and the plateau invariant: once settled,
    /// nothing moves until the plateau ends. Settled is the earlier of (a) replicas where no
    /// noisy sample can move the threshold answer past the HPA's tolerance, and (b) replicas
    /// inside the clean band `[ceil(V/T_up)` within tolerance, `ceil(V/T_down)]` once the settle
    /// budget after the plateau began (both sustain windows, staleness, a scrape and two syncs)
    /// has passed, when every sustain decision looks at plateau data only.
    pub(super) fn threshold_analysis(&mut self) {
        let (Some(th), Some(load)) = (self.threshold, self.scenario.load.clone()) else {
            return;
        };
        let rows = self.report.rows.clone();
        let mut notes = Vec::new();
        let (reversals, events) = reversals(&rows);
        notes.push(format!(
            "threshold: {events} scale events, {reversals} reversal(s) of direction"
        ));
        let lag = rows
            .iter()
            .map(|r| (r.t, self.overload_lag(&th, &load, r.t, r.replicas)))
            .max_by_key(|(_, l)| *l);
        if let Some((at, lag)) = lag {
            notes.push(format!(
                "threshold: max overload lag {} (at {}): replicas cover the clean load of that long ago at upPerReplica {}",
                fmt_t(lag),
                fmt_t(at),
                th.up
            ));
        }
        let tolerances = self.hpa.tolerances();
        let settle_budget = th.sustain_up_ms.max(th.sustain_down_ms)
            + self.stale_after
            + self.interval
            + 2 * SYNC_PERIOD.as_millis() as Millis;
        for (from, to, v) in load.plateaus() {
            let hi_up = ceil_div(v * (1.0 + load.noise), th.up);
            let lo_down = ceil_div(v * (1.0 - load.noise), th.down);
            let (clean_up, clean_down) = (ceil_div(v, th.up), ceil_div(v, th.down));
            let in_span: Vec<&SyncRow> = rows.iter().filter(|r| r.t >= from && r.t <= to).collect();
            let settled = in_span.iter().position(|r| {
                let n = i64::from(r.replicas);
                let safe = n > 0
                    && (hi_up <= n || tolerances.is_within(hi_up as f64 / n as f64))
                    && n <= lo_down;
                let in_clean_band = n > 0
                    && (clean_up <= n || tolerances.is_within(clean_up as f64 / n as f64))
                    && n <= clean_down;
                safe || (in_clean_band && r.t >= from + settle_budget)
            });
            match settled {
                Some(i) => {
                    let at = in_span[i];
                    let moved: Vec<(Millis, i32, i32)> = in_span[i + 1..]
                        .iter()
                        .filter(|r| r.replicas != r.spec_replicas)
                        .map(|r| (r.t, r.spec_replicas, r.replicas))
                        .collect();
                    notes.push(format!(
                        "threshold: plateau {}..{} at {v} (noise ±{}%, served range [{hi_up} up, {lo_down} down]): settled at {} with {} replicas, {} scale event(s) after",
                        fmt_t(from),
                        fmt_t(to),
                        load.noise * 100.0,
                        fmt_t(at.t),
                        at.replicas,
                        moved.len()
                    ));
                    for (t, a, b) in moved {
                        self.violation(
                            "plateau",
                            t,
                            format!(
                                "replicas {a} -> {b} on the plateau {}..{} after settling at {}",
                                fmt_t(from),
                                fmt_t(to),
                                fmt_t(at.t)
                            ),
                        );
                    }
                }
                None => notes.push(format!(
                    "threshold: plateau {}..{} too short to settle (budget {})",
                    fmt_t(from),
                    fmt_t(to),
                    fmt_t(settle_budget)
                )),
            }
        }
        self.report.threshold_notes = notes;
    }

    pub(super) fn finish(&mut self) {
        if let Some(e) = self.episode.take() {
            self.report.convergences.push(e);
        }
        self.threshold_analysis();
        let rows = &self.report.rows;
        let replicas_in = |from: Millis, to: Millis| {
            rows.iter()
                .filter(move |r| r.t >= from && r.t <= to)
                .map(|r| r.replicas)
        };
        let mut results = Vec::new();
        for e in &self.scenario.expect {
            let (ok, measured) = match e {
                Expectation::FinalReplicas(n) => {
                    let last = rows.last().map(|r| r.replicas);
                    (last == Some(*n), format!("final {}", opt(last)))
                }
                Expectation::NeverBelow(n) => {
                    let min = replicas_in(0, Millis::MAX).min();
                    (min.is_some_and(|m| m >= *n), format!("min {}", opt(min)))
                }
                Expectation::NeverAbove(n) => {
                    let max = replicas_in(0, Millis::MAX).max();
                    (max.is_some_and(|m| m <= *n), format!("max {}", opt(max)))
                }
                Expectation::Replicas(w) => {
                    let from = w.from.map(ms).unwrap_or(0);
                    let to = w.to.map(ms).unwrap_or(Millis::MAX);
                    let min = replicas_in(from, to).min();
                    let max = replicas_in(from, to).max();
                    let ok = min.is_some()
                        && w.min.is_none_or(|m| min.is_some_and(|v| v >= m))
                        && w.max.is_none_or(|m| max.is_some_and(|v| v <= m));
                    (ok, format!("min {} max {}", opt(min), opt(max)))
                }
                Expectation::Reaches(r) => {
                    let first = rows.iter().find(|row| row.replicas == r.replicas);
                    match first {
                        Some(row) => (row.t <= ms(r.by), format!("first at {}", fmt_t(row.t))),
                        None => (false, "never".into()),
                    }
                }
                Expectation::MaxConvergenceLag(d) => {
                    let lags: Vec<Millis> = self
                        .report
                        .convergences
                        .iter()
                        .filter_map(|c| match c.result {
                            ConvergenceResult::Reached { lag } => Some(lag),
                            _ => None,
                        })
                        .collect();
                    let max = lags.iter().max().copied();
                    (
                        !lags.is_empty() && max.is_some_and(|m| m <= ms(*d)),
                        format!(
                            "{} convergences, max lag {}",
                            lags.len(),
                            max.map(fmt_t).unwrap_or_else(|| "-".into())
                        ),
                    )
                }
                Expectation::MaxReversals(n) => {
                    let (r, events) = reversals(rows);
                    (r <= *n, format!("{r} reversal(s) in {events} scale events"))
                }
                Expectation::NoDecrease(w) => {
                    let from = w.from.map(ms).unwrap_or(0);
                    let to = w.to.map(ms).unwrap_or(Millis::MAX);
                    let falls: Vec<String> = rows
                        .iter()
                        .filter(|r| r.t >= from && r.t <= to && r.replicas < r.spec_replicas)
                        .map(|r| format!("{} -> {} at {}", r.spec_replicas, r.replicas, fmt_t(r.t)))
                        .collect();
                    let n = rows.iter().filter(|r| r.t >= from && r.t <= to).count();
                    (
                        n > 0 && falls.is_empty(),
                        if falls.is_empty() {
                            format!("{n} syncs, none lower")
                        } else {
                            falls.join(", ")
                        },
                    )
                }
                Expectation::MaxOverloadLag(d) => {
                    match (self.threshold, self.scenario.load.as_ref()) {
                        (Some(th), Some(load)) => {
                            let max = rows
                                .iter()
                                .map(|r| self.overload_lag(&th, load, r.t, r.replicas))
                                .max()
                                .unwrap_or(0);
                            (
                                !rows.is_empty() && max <= ms(*d),
                                format!("max {}", fmt_t(max)),
                            )
                        }
                        _ => (false, "no load with a threshold metric".into()),
                    }
                }
            };
            results.push(ExpectationResult {
                expectation: e.to_string(),
                ok,
                measured,
            });
        }
        self.report.expectations = results;
    }
}
