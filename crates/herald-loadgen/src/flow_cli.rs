//! `herald-loadgen flow`: one run of the flow-control evaluation
//! ([`crate::flow_eval`]) against a running broker, its points appended to
//! a JSON-lines file with the run's labels.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use serde_json::json;

use crate::cpu_quota::{self, CpuQuota, CpuQuotaSpec};
use crate::disk_hog::{self, DiskHogSpec};
use crate::flow_eval::{self, FlowSpec};
use crate::flow_interleave::{self, Interleave, Setup};
use crate::push::fanout::layout::Choice;

/// The run's settings.
#[derive(Debug, clap::Args)]
pub struct FlowArgs {
    /// The broker's Kafka listener.
    #[arg(long)]
    pub bootstrap: SocketAddr,
    /// Its admin listener (for the flow-control limit).
    #[arg(long)]
    pub admin: Option<SocketAddr>,
    /// Subjects (topics made for the run, one partition each).
    #[arg(long, default_value_t = 1)]
    pub subjects: u32,
    /// How each request's subject is chosen.
    #[arg(long, value_enum, default_value_t = Choice::Uniform)]
    pub choice: Choice,
    /// Publishers, each on its own connection.
    #[arg(long, default_value_t = 8)]
    pub publishers: u32,
    /// Records per request.
    #[arg(long, default_value_t = 16)]
    pub batch: u32,
    /// Requests in flight per publisher.
    #[arg(long, default_value_t = 64)]
    pub in_flight: usize,
    /// acks: 1 or -1.
    #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
    pub acks: i16,
    /// Seconds of the run.
    #[arg(long, default_value_t = 10.0)]
    pub secs: f64,
    /// Records per point (the seed's N).
    #[arg(long, default_value_t = 20_000)]
    pub window: u64,
    /// Seconds in when the late three quarters of the publishers start.
    #[arg(long)]
    pub demand_step_at: Option<f64>,
    /// Seconds in when busy threads start taking the broker's core.
    #[arg(long)]
    pub hog_at: Option<f64>,
    /// The broker's core, for the busy threads.
    #[arg(long, default_value_t = 0)]
    pub hog_cpu: usize,
    /// Busy threads.
    #[arg(long, default_value_t = 1)]
    pub hog_threads: usize,
    /// Seconds in when threads start writing and fdatasyncing on the
    /// broker's data disk (the disk capacity step: where the broker is
    /// bound by its fsyncs, they take part of the disk's flushes).
    #[arg(long, requires = "disk_hog_dir")]
    pub disk_hog_at: Option<f64>,
    /// An existing directory on the broker's data disk for the syncing
    /// threads' files (removed at the end of the run).
    #[arg(long)]
    pub disk_hog_dir: Option<PathBuf>,
    /// Syncing threads, each on its own file.
    #[arg(long, default_value_t = 1)]
    pub disk_hog_threads: usize,
    /// Bytes per write of the syncing threads.
    #[arg(long, default_value_t = disk_hog::BLOCK_BYTES)]
    pub disk_hog_bytes: usize,
    /// Seconds in when a CPU quota goes on the broker's cgroup (the CPU
    /// quota capacity step: the broker keeps `--quota-share` of a core,
    /// however many threads it runs; taken off at the end of the run).
    #[arg(long, requires = "quota_cgroup")]
    pub quota_at: Option<f64>,
    /// The broker's cgroup, made by the caller with the broker in it: a
    /// directory of the cgroup v1 cpu controller (cpu.cfs_quota_us) or a
    /// cgroup v2 one (cpu.max).
    #[arg(long, requires = "quota_at")]
    pub quota_cgroup: Option<PathBuf>,
    /// The CPU the quota leaves the broker, in cores.
    #[arg(long, default_value_t = cpu_quota::DEFAULT_SHARE)]
    pub quota_share: f64,
    /// Open loop: records per second offered across all publishers on a
    /// fixed schedule, whatever the answers (default: closed loop).
    #[arg(long)]
    pub offered_rate: Option<f64>,
    /// Open loop: ms after it was due that a request's answer counts as
    /// timed out.
    #[arg(long, default_value_t = 5000)]
    pub deadline_ms: u64,
    /// Setups the run takes in turn, switched over the admin API
    /// (`fixed:1024,off,adaptive:100`: MODE or MODE:LIMIT, a controller's
    /// limit being its first); needs `--admin`.
    #[arg(long, value_delimiter = ',', value_parser = parse_setup)]
    pub interleave: Vec<Setup>,
    /// Seconds of each setup's turn when interleaving.
    #[arg(long, default_value_t = 10.0)]
    pub slice_secs: f64,
    /// Labels every point carries (`controller=adaptive`), repeatable.
    #[arg(long = "label", value_name = "KEY=VALUE")]
    pub labels: Vec<String>,
    /// JSON-lines file the points are appended to.
    #[arg(long)]
    pub out: PathBuf,
}

fn parse_setup(text: &str) -> Result<Setup, String> {
    Setup::parse(text)
}

/// Runs one evaluation and appends its points.
pub fn run(args: FlowArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.interleave.is_empty() || args.admin.is_some(),
        "--interleave switches the flow control over the admin API: give --admin"
    );
    if let Err(why) = flow_interleave::distinct(&args.interleave) {
        anyhow::bail!("--interleave: {why}");
    }
    // Every time is read, and every step checked, before the topics are
    // made: a bad one then leaves nothing behind on the broker.
    let quota = match args.quota_at.zip(args.quota_cgroup.clone()) {
        Some((at, dir)) => Some(CpuQuotaSpec {
            at: seconds("--quota-at", at)?,
            dir,
            share: args.quota_share,
        }),
        None => None,
    };
    let duration = seconds("--secs", args.secs)?;
    let demand_step_at = args
        .demand_step_at
        .map(|at| seconds("--demand-step-at", at))
        .transpose()?;
    let hog_at = args.hog_at.map(|at| seconds("--hog-at", at)).transpose()?;
    let disk_hog = match args.disk_hog_at.zip(args.disk_hog_dir.clone()) {
        Some((at, dir)) => {
            anyhow::ensure!(
                dir.is_dir(),
                "--disk-hog-dir {}: not a directory",
                dir.display()
            );
            Some(DiskHogSpec {
                at: seconds("--disk-hog-at", at)?,
                dir,
                threads: args.disk_hog_threads,
                block: args.disk_hog_bytes,
                region: disk_hog::REGION_BYTES,
            })
        }
        None => None,
    };
    if let Some(quota) = &quota {
        // Checked before the topics are made too, so that a cgroup that
        // will not take the quota leaves nothing behind on the broker.
        CpuQuota::open(quota)?;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let run_id = format!("{:x}", std::process::id() ^ (args.secs.to_bits() as u32));
    let topics: Vec<String> = (0..args.subjects.max(1))
        .map(|i| format!("flow-{run_id}-{i}"))
        .collect();
    runtime.block_on(async {
        let creations = topics
            .iter()
            .map(|topic| crate::admin::create_topic(args.bootstrap, topic));
        for created in futures_util::future::join_all(creations).await {
            created.context("creating the subjects' topics")?;
        }
        anyhow::Ok(())
    })?;
    let spec = FlowSpec {
        addr: args.bootstrap,
        admin: args.admin,
        topics: topics.clone(),
        choice: args.choice,
        publishers: args.publishers,
        batch: args.batch,
        in_flight: args.in_flight,
        acks: args.acks,
        duration,
        window: args.window,
        demand_step_at,
        hog_at,
        hog_cpu: args.hog_cpu,
        hog_threads: args.hog_threads,
        disk_hog,
        cpu_quota: quota,
        seed: 0x5eed_0004,
        offered_rate: args.offered_rate,
        deadline: Duration::from_millis(args.deadline_ms),
        interleave: (!args.interleave.is_empty()).then(|| Interleave {
            setups: args.interleave.clone(),
            slice: Duration::from_secs_f64(args.slice_secs.max(0.1)),
        }),
    };
    let flow_eval::FlowRun {
        points,
        disk_hog,
        cpu_quota,
    } = runtime.block_on(flow_eval::run(&spec))?;
    let mut labels = serde_json::Map::new();
    for label in &args.labels {
        let (key, value) = label
            .split_once('=')
            .with_context(|| format!("label {label}: expected KEY=VALUE"))?;
        labels.insert(key.to_owned(), json!(value));
    }
    labels.insert("subjects".into(), json!(args.subjects));
    labels.insert("choice".into(), json!(args.choice.name()));
    if let Some(hog) = &disk_hog {
        // How many flushes the disk step took, for the report.
        labels.insert("disk_hog_syncs".into(), json!(hog.syncs));
        labels.insert("disk_hog_secs".into(), json!(hog.secs));
        labels.insert(
            "disk_hog_threads".into(),
            json!(args.disk_hog_threads.max(1)),
        );
        labels.insert("disk_hog_bytes".into(), json!(args.disk_hog_bytes.max(1)));
    }
    if let Some(quota) = &cpu_quota {
        // The step's size, for the report; quota_applied_at is missing
        // when the run ended before the step.
        labels.insert("quota_share".into(), json!(quota.share));
        labels.insert("quota_us".into(), json!(quota.quota_us));
        labels.insert("quota_period_us".into(), json!(quota.period_us));
        labels.insert("quota_layout".into(), json!(quota.layout.name()));
        if let Some(at) = quota.applied_at {
            labels.insert("quota_applied_at".into(), json!(at));
        }
    }
    let mut out = String::new();
    for point in &points {
        let mut row = serde_json::to_value(point)?;
        if let Some(map) = row.as_object_mut() {
            map.extend(labels.clone());
        }
        out.push_str(&row.to_string());
        out.push('\n');
    }
    use std::io::Write as _;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&args.out)
        .and_then(|mut file| file.write_all(out.as_bytes()))
        .with_context(|| format!("appending to {}", args.out.display()))?;
    let published = points.last().map_or(0, |p| p.published);
    let expired: u64 = points.iter().map(|p| p.expired).sum();
    eprintln!(
        "{} points, {published} records in {:.1} s ({:.0}/s), {expired} requests expired",
        points.len(),
        args.secs,
        published as f64 / args.secs
    );
    if let Some(hog) = &disk_hog {
        eprintln!(
            "disk hog: {} fdatasyncs of {} bytes in {:.1} s ({:.0}/s) on {} thread(s)",
            hog.syncs,
            args.disk_hog_bytes.max(1),
            hog.secs,
            hog.syncs_per_sec(),
            args.disk_hog_threads.max(1)
        );
    }
    if let Some(quota) = &cpu_quota {
        match quota.applied_at {
            Some(at) => eprintln!(
                "CPU quota: {} of a core ({} µs every {} µs, cgroup {}) from {at:.2} s",
                quota.share,
                quota.quota_us,
                quota.period_us,
                quota.layout.name()
            ),
            None => eprintln!("CPU quota: the run ended before the step"),
        }
    }
    runtime.block_on(async {
        for topic in &topics {
            let _ = crate::admin::delete_topic(args.bootstrap, topic).await;
        }
    });
    Ok(())
}

/// `value` seconds given for `flag`, or why not (negative, not a number,
/// too large), where `Duration::from_secs_f64` would panic.
fn seconds(flag: &str, value: f64) -> anyhow::Result<Duration> {
    Duration::try_from_secs_f64(value)
        .map_err(|_| anyhow::anyhow!("{flag} {value}: expected seconds, 0 or more"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_time_that_is_not_seconds_is_refused_with_its_flag() {
        assert_eq!(
            seconds("--hog-at", 2.5).expect("seconds"),
            Duration::from_millis(2500)
        );
        for bad in [-1.0, f64::NAN, f64::INFINITY] {
            let e = seconds("--disk-hog-at", bad).expect_err("refused");
            assert!(e.to_string().starts_with("--disk-hog-at"), "{bad}: {e}");
        }
    }
}
