//! `summarize`: turns the JSON lines of `loadgen` runs into the comparison summary.
//!
//! ```text
//! summarize RUNS.jsonl OUTPUT.json [--baseline raw] [--candidate fusion] [--note TEXT]
//! ```
//!
//! Runs are grouped by mode (`stdio`, or `http` plus the protocol) and target. Within a mode,
//! the n-th candidate run is paired with the n-th baseline run (the comparison script runs them
//! back to back, A then B, in every round), and the summary reports, per mode, the median of
//! the paired ratios candidate/baseline for calls/s, p50 and p99 latency, server CPU per call and
//! server context switches per call, next
//! to each target's medians. Pairing runs that ran seconds apart cancels most of the drift of a
//! shared machine's load. The summary is written to `OUTPUT.json` and printed as a table.

use std::collections::BTreeMap;
use std::process::ExitCode;

use serde_json::{Map, Value, json};

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("summarize: {error}");
            ExitCode::FAILURE
        }
    }
}

fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let middle = values.len() / 2;
    Some(if values.len() % 2 == 1 {
        values[middle]
    } else {
        (values[middle - 1] + values[middle]) / 2.0
    })
}

fn round(value: f64, digits: i32) -> f64 {
    let scale = 10f64.powi(digits);
    (value * scale).round() / scale
}

fn number(run: &Value, key: &str) -> Option<f64> {
    run.get(key).and_then(Value::as_f64)
}

/// Server CPU microseconds per call.
fn cpu_per_call(run: &Value) -> Option<f64> {
    let calls = number(run, "calls")?;
    (calls > 0.0).then(|| number(run, "server_cpu_s").map(|cpu| cpu * 1e6 / calls))?
}

fn mode_of(run: &Value) -> String {
    let transport = run.get("transport").and_then(Value::as_str).unwrap_or("?");
    let protocol = run.get("protocol").and_then(Value::as_str).unwrap_or("?");
    match transport {
        "stdio" => "stdio".to_owned(),
        other => format!("{other}-{protocol}"),
    }
}

/// A named metric read from one run.
type Metric = (&'static str, fn(&Value) -> Option<f64>);

const METRICS: [Metric; 6] = [
    ("calls_per_s", |run| number(run, "calls_per_s")),
    ("p50_us", |run| number(run, "p50_us")),
    ("p99_us", |run| number(run, "p99_us")),
    ("cpu_us_per_call", cpu_per_call),
    ("server_peak_rss_kb", |run| {
        number(run, "server_peak_rss_kb")
    }),
    // The server's context switches per call, all its threads (`loadgen`'s
    // `server_cs_per_call`): the thread hops a call costs.
    ("cs_per_call", |run| number(run, "server_cs_per_call")),
];

fn medians(runs: &[&Value]) -> Map<String, Value> {
    let mut out = Map::new();
    for (name, metric) in METRICS {
        let mut values: Vec<f64> = runs.iter().filter_map(|run| metric(run)).collect();
        let digits = if name == "cs_per_call" { 2 } else { 1 };
        out.insert(
            name.into(),
            median(&mut values).map_or(Value::Null, |value| round(value, digits).into()),
        );
    }
    let total = |key: &str| -> u64 {
        runs.iter()
            .filter_map(|run| run.get(key).and_then(Value::as_u64))
            .sum()
    };
    out.insert("runs".into(), runs.len().into());
    out.insert("errors".into(), total("errors").into());
    out.insert("bad_responses".into(), total("bad_responses").into());
    out
}

fn run() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let input = args
        .next()
        .ok_or("usage: summarize RUNS.jsonl OUTPUT.json [options]")?;
    let output = args
        .next()
        .ok_or("usage: summarize RUNS.jsonl OUTPUT.json [options]")?;
    let (mut baseline, mut candidate, mut note) = ("raw".to_owned(), "fusion".to_owned(), None);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--baseline" => baseline = value,
            "--candidate" => candidate = value,
            "--note" => note = Some(value),
            other => return Err(format!("unknown option {other}")),
        }
    }
    let text = std::fs::read_to_string(&input).map_err(|error| format!("{input}: {error}"))?;
    let runs: Vec<Value> = text
        .lines()
        .filter(|line| line.trim_start().starts_with('{'))
        .map(|line| serde_json::from_str(line).map_err(|error| format!("{input}: {error}")))
        .collect::<Result<_, _>>()?;

    // mode -> target -> runs, in file order.
    let mut grouped: BTreeMap<String, BTreeMap<String, Vec<&Value>>> = BTreeMap::new();
    for run in &runs {
        let target = run.get("target").and_then(Value::as_str).unwrap_or("?");
        grouped
            .entry(mode_of(run))
            .or_default()
            .entry(target.to_owned())
            .or_default()
            .push(run);
    }

    let mut modes = Map::new();
    println!(
        "{:<18} {:>9} {:>9} {:>6}   {:>7} {:>7} {:>6}   {:>7} {:>7} {:>6}   {:>7} {:>7} {:>6}   {:>7} {:>7} {:>6}",
        "mode",
        format!("{candidate}/s"),
        format!("{baseline}/s"),
        "ratio",
        "p50 c",
        "p50 b",
        "ratio",
        "p99 c",
        "p99 b",
        "ratio",
        "cpu/c c",
        "cpu/c b",
        "ratio",
        "cs/c c",
        "cs/c b",
        "ratio"
    );
    for (mode, targets) in &grouped {
        let empty = Vec::new();
        let a = targets.get(&candidate).unwrap_or(&empty);
        let b = targets.get(&baseline).unwrap_or(&empty);
        let pairs: Vec<(&Value, &Value)> = a.iter().copied().zip(b.iter().copied()).collect();
        let mut ratios = Map::new();
        for (name, metric) in [
            ("calls_per_s", METRICS[0].1),
            ("p50_us", METRICS[1].1),
            ("p99_us", METRICS[2].1),
            ("cpu_us_per_call", METRICS[3].1),
            ("server_peak_rss_kb", METRICS[4].1),
            ("cs_per_call", METRICS[5].1),
        ] {
            let mut values: Vec<f64> = pairs
                .iter()
                .filter_map(|(a, b)| Some(metric(a)? / metric(b)?))
                .filter(|ratio| ratio.is_finite())
                .collect();
            ratios.insert(
                name.into(),
                median(&mut values).map_or(Value::Null, |value| round(value, 3).into()),
            );
        }
        let (ma, mb) = (medians(a), medians(b));
        let show = |map: &Map<String, Value>, key: &str| {
            map.get(key)
                .and_then(Value::as_f64)
                .map_or("-".to_owned(), |value| format!("{value:.0}"))
        };
        let show_cs = |map: &Map<String, Value>| {
            map.get("cs_per_call")
                .and_then(Value::as_f64)
                .map_or("-".to_owned(), |value| format!("{value:.2}"))
        };
        let show_ratio = |key: &str| {
            ratios
                .get(key)
                .and_then(Value::as_f64)
                .map_or("-".to_owned(), |value| format!("{value:.2}"))
        };
        println!(
            "{:<18} {:>9} {:>9} {:>6}   {:>7} {:>7} {:>6}   {:>7} {:>7} {:>6}   {:>7} {:>7} {:>6}   {:>7} {:>7} {:>6}",
            mode,
            show(&ma, "calls_per_s"),
            show(&mb, "calls_per_s"),
            show_ratio("calls_per_s"),
            show(&ma, "p50_us"),
            show(&mb, "p50_us"),
            show_ratio("p50_us"),
            show(&ma, "p99_us"),
            show(&mb, "p99_us"),
            show_ratio("p99_us"),
            show(&ma, "cpu_us_per_call"),
            show(&mb, "cpu_us_per_call"),
            show_ratio("cpu_us_per_call"),
            show_cs(&ma),
            show_cs(&mb),
            show_ratio("cs_per_call"),
        );
        let mut entry = Map::new();
        entry.insert(
            format!("ratio_{candidate}_over_{baseline}"),
            Value::Object(ratios),
        );
        entry.insert("pairs".into(), pairs.len().into());
        entry.insert(candidate.clone(), Value::Object(ma));
        entry.insert(baseline.clone(), Value::Object(mb));
        modes.insert(mode.clone(), Value::Object(entry));
    }
    let problems: u64 = runs
        .iter()
        .map(|run| {
            ["errors", "bad_responses"]
                .iter()
                .filter_map(|key| run.get(*key).and_then(Value::as_u64))
                .sum::<u64>()
        })
        .sum();
    let summary = json!({
        "candidate": candidate,
        "baseline": baseline,
        "ratios": "median over rounds of candidate/baseline, each round's two runs back to back; cpu_us_per_call is server CPU (utime+stime) per call; cs_per_call is the server's context switches (voluntary + involuntary, all threads) per call",
        "note": note,
        "modes": modes,
        "runs": runs,
    });
    let pretty = serde_json::to_string_pretty(&summary).map_err(|error| error.to_string())?;
    std::fs::write(&output, pretty + "\n").map_err(|error| format!("{output}: {error}"))?;
    if problems > 0 {
        println!("WARNING: {problems} errors or bad responses in total; see the runs");
    }
    println!("summary written to {output}");
    Ok(())
}
