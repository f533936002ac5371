//! A matching consumer in the pipeline: every record it receives is matched, and what it
//! delivers equals brute force over the same records replayed through fresh market state.

use std::sync::{Arc, Mutex};

use tickplant_core::matcher::{MarketEvents, Matcher, Schema};
use tickplant_io::pipeline::{self, ConsumerAction, Handler, MatchHandler, MatchSpec, Record, SlowPolicy};

mod common;

/// Strategies over the market attributes, from a small deterministic generator.
fn strategies(n: usize) -> String {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = move |m: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % m
    };
    let symbols = ["AAAA", "AAAB", "AAAC", "AAAD", "AAAE"];
    let mut out = String::new();
    for id in 1..=n {
        let mut preds = Vec::new();
        if next(4) != 0 {
            preds.push(format!("symbol = \"{}\"", symbols[next(5) as usize]));
        }
        for _ in 0..1 + next(3) {
            preds.push(match next(9) {
                0 => format!("spread <= 0.0{}", 1 + next(9)),
                1 => format!("size >= {}", 100 * (1 + next(9))),
                2 => "last > mid".to_string(),
                3 => "last <= bid".to_string(),
                4 => format!("action = \"{}\"", ["add", "execute", "cancel", "delete", "trade"][next(5) as usize]),
                5 => format!("volume >= {}", 1000 * next(50)),
                6 => format!("nasdaq_bid_size >= {}", 100 * next(20)),
                7 => format!("side in (\"bid\", \"none\") and ask_size < {}", 100 * next(30)),
                _ => format!("price != {}.{:02}", 10 + next(90), next(100)),
            });
        }
        out.push_str(&format!("{id}: {}\n", preds.join(" and ")));
    }
    out
}

#[test]
fn matching_consumer_equals_brute_force_on_the_records() {
    let dir = tempfile::tempdir().unwrap();
    let feed = dir.path().join("feed.pcap");
    common::itch_capture(&feed, 7, 40_000, |_| {});

    let text = strategies(400);
    let mut schema = Schema::new();
    let parsed = schema.parse_strategies(&text).unwrap();
    let records = Arc::new(Mutex::new(Vec::<Record>::new()));
    let delivered = Arc::new(Mutex::new(Vec::<(u64, Vec<u64>)>::new()));
    let (r2, d2) = (records.clone(), delivered.clone());
    let consumer = |name: &str, action| common::consumer(name, action, SlowPolicy::Backpressure, 4096);
    let matches_path = dir.path().join("matches.jsonl");
    let spec = common::itch_spec(
        feed,
        vec![
            consumer("all", ConsumerAction::Handler(Handler::new(move |r: &Record| r2.lock().unwrap().push(*r)))),
            consumer(
                "strategies",
                ConsumerAction::Match(Box::new(MatchSpec {
                    schema: schema.clone(),
                    strategies: parsed.clone(),
                    venue: "nasdaq".into(),
                    path: Some(matches_path.clone()),
                    handler: Some(MatchHandler::new(move |r: &Record, ids: &[u64]| {
                        d2.lock().unwrap().push((r.event.sequence, ids.to_vec()))
                    })),
                })),
            ),
        ],
    );
    let out = pipeline::run(&spec).unwrap();
    out.report.check().unwrap();
    let m = out.report.consumers[1].matching.clone().expect("a matching report");
    assert_eq!(m.strategies, 400);
    assert_eq!(m.events, 40_000);

    // Replay the same records (both consumers took everything) through fresh state, brute force.
    let mut oracle = Matcher::with_schema(schema);
    for s in parsed {
        oracle.insert(s).unwrap();
    }
    let mut market = MarketEvents::new(oracle.schema(), &["nasdaq"]).unwrap();
    let records = records.lock().unwrap();
    assert_eq!(records.len(), 40_000);
    let mut want = Vec::new();
    let mut ids = Vec::new();
    for r in records.iter() {
        let key = market.symbol(oracle.schema(), r.symbol());
        let e = market.update(key, 0, &r.event, r.bbo);
        oracle.match_brute_force(e, &mut ids);
        if !ids.is_empty() {
            want.push((r.event.sequence, ids.clone()));
        }
    }
    let got = delivered.lock().unwrap();
    assert!(want.len() > 1_000, "the strategies should match often: {}", want.len());
    assert_eq!(got.len() as u64, m.events_with_matches);
    assert_eq!(got.iter().map(|g| g.1.len() as u64).sum::<u64>(), m.matches);
    assert!(*got == want, "the matching consumer differs from brute force");
    // The file holds the same, one line per event with matches.
    let lines = std::fs::read_to_string(&matches_path).unwrap();
    assert_eq!(lines.lines().count(), want.len());
    let first = lines.lines().next().unwrap();
    assert!(first.contains(&format!("\"sequence\":{},", want[0].0)) && first.contains("\"matches\":["), "{first}");
}
