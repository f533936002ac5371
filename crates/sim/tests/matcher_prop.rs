//! Property tests: the strategy index equals brute force on random strategies and events of
//! every workload and on a random mix of every predicate form, including after random
//! inserts and deletes between events.

use proptest::prelude::*;
use tickplant_core::matcher::{MatchEvent, Matcher, Schema};
use tickplant_sim::{generate_matching, match_event, GenValue, MatchGenConfig, Workload};

fn to_event(m: &Matcher, pairs: &[(String, GenValue)]) -> MatchEvent {
    match_event(m, pairs).expect("a valid event")
}

fn check(m: &mut Matcher, e: &MatchEvent) -> Result<usize, TestCaseError> {
    let (mut got, mut want) = (Vec::new(), Vec::new());
    m.match_event(e, &mut got);
    m.match_brute_force(e, &mut want);
    prop_assert_eq!(&got, &want);
    Ok(got.len())
}

/// One strategy of a random mix: every operator, `in`, strings, attr-vs-attr, duplicates
/// of an attribute, empty intervals; few attributes and values so that matches happen.
fn mixed() -> impl Strategy<Value = String> {
    let num_pred = (0usize..4, 0usize..6, 0i64..6, 0u8..3).prop_map(|(a, op, v, frac)| {
        let op = ["=", "!=", "<", "<=", ">", ">="][op];
        let v = if frac == 0 { format!("{v}.5") } else { v.to_string() };
        format!("n{a} {op} {v}")
    });
    let str_pred = (0usize..3, any::<bool>(), proptest::collection::vec(0usize..4, 1..3), 0u8..3).prop_map(
        |(a, ne, vals, form)| match form {
            0 => format!("s{a} in ({})", vals.iter().map(|v| format!("\"v{v}\"")).collect::<Vec<_>>().join(", ")),
            _ => format!("s{a} {} \"v{}\"", if ne { "!=" } else { "=" }, vals[0]),
        },
    );
    let attr_pred = (0usize..4, 0usize..6, 0usize..4)
        .prop_map(|(a, op, b)| format!("n{a} {} n{b}", ["=", "!=", "<", "<=", ">", ">="][op]));
    let in_num = proptest::collection::vec(0i64..6, 1..4)
        .prop_map(|v| format!("n3 in ({})", v.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(", ")));
    let pred = prop_oneof![4 => num_pred, 3 => str_pred, 1 => attr_pred, 1 => in_num];
    proptest::collection::vec(pred, 1..5).prop_map(|p| p.join(" and "))
}

fn mixed_event() -> impl Strategy<Value = Vec<(String, GenValue)>> {
    (
        proptest::collection::vec(proptest::option::weighted(0.9, 0i64..12), 4),
        proptest::collection::vec(proptest::option::weighted(0.9, 0usize..5), 3),
    )
        .prop_map(|(nums, strs)| {
            let mut e = Vec::new();
            for (i, n) in nums.iter().enumerate() {
                if let Some(n) = n {
                    e.push((format!("n{i}"), GenValue::Num(format!("{}.{}", n / 2, if n % 2 == 1 { 5 } else { 0 }))));
                }
            }
            for (i, s) in strs.iter().enumerate() {
                if let Some(s) = s {
                    e.push((format!("s{i}"), GenValue::Str(format!("v{s}"))));
                }
            }
            e
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn workloads_match_brute_force(w in 0usize..4, n in 1usize..400, symbols in 1usize..5, seed in any::<u64>(), deletes in proptest::collection::vec(any::<prop::sample::Index>(), 0..60)) {
        let workload = [Workload::A, Workload::B, Workload::C, Workload::P][w];
        // Few symbols so that workloads b and c match often, and their clusters grow big
        // enough to be bucketed and re-cut.
        let cfg = MatchGenConfig { symbols, ..MatchGenConfig::new(workload, n, 12, seed) };
        let g = generate_matching(&cfg);
        // Parse first so that the events can be built before the inserts, then match while
        // inserting: members still pending (not yet filed in the buckets) must match too.
        let mut schema = Schema::new();
        let parsed = schema.parse_strategies(&g.strategies.join("\n")).unwrap();
        let mut m = Matcher::with_schema(schema);
        let events: Vec<MatchEvent> = g.events.iter().map(|e| to_event(&m, e)).collect();
        for (i, s) in parsed.into_iter().enumerate() {
            m.insert(s).unwrap();
            if i % 29 == 28 {
                check(&mut m, &events[i % events.len()])?;
            }
        }
        for e in &events {
            check(&mut m, e)?;
        }
        // Delete some, re-insert half of those, match again after every change.
        let mut removed = Vec::new();
        for (k, d) in deletes.iter().enumerate() {
            let id = (d.index(n) + 1) as u64;
            if let Some(s) = m.remove(id) {
                removed.push(s);
            }
            if k % 2 == 1 {
                if let Some(s) = removed.pop() {
                    m.insert(s).unwrap();
                }
            }
            check(&mut m, &events[k % events.len()])?;
        }
        // Churn: remove most strategies, then insert different ones (new ids, new intervals)
        // into the slots they leave, and match every event again.
        for id in 1..=n as u64 {
            if id % 4 != 0 {
                m.remove(id);
            }
        }
        let fresh = generate_matching(&MatchGenConfig { symbols, ..MatchGenConfig::new(workload, n, 1, seed ^ 0x5eed) });
        for line in &fresh.strategies {
            let (id, rest) = line.split_once(':').unwrap();
            let id: u64 = id.parse().unwrap();
            m.insert_text(&format!("{}:{rest}", id + n as u64)).unwrap();
        }
        for e in &events {
            check(&mut m, e)?;
        }
    }

    #[test]
    fn mixed_predicates_match_brute_force(
        strategies in proptest::collection::vec(mixed(), 1..120),
        events in proptest::collection::vec(mixed_event(), 1..20),
        removals in proptest::collection::vec(any::<prop::sample::Index>(), 0..40),
    ) {
        let mut m = Matcher::new();
        let mut ids = Vec::new();
        for (i, s) in strategies.iter().enumerate() {
            if m.insert_text(&format!("{}: {s}", i + 1)).is_ok() {
                ids.push(i as u64 + 1);
            }
        }
        let evs: Vec<MatchEvent> = events.iter().map(|e| to_event(&m, e)).collect();
        for e in &evs {
            check(&mut m, e)?;
        }
        for (k, r) in removals.iter().enumerate() {
            if ids.is_empty() {
                break;
            }
            let id = ids.swap_remove(r.index(ids.len()));
            m.remove(id);
            check(&mut m, &evs[k % evs.len()])?;
        }
    }
}

/// A cluster big enough for the most buckets (more than 8,192 members on an attribute), on
/// values of both sizes: keys that fit an `i64` (the compact boundary lists) and keys past
/// ±9.2e9 (the open end buckets' whole intervals); events at strategies' interval ends, one
/// off them, and anywhere; with removals and new inserts between events: equal to brute
/// force throughout.
#[test]
fn a_big_cluster_of_ranges_matches_brute_force() {
    use rand::{Rng, SeedableRng};
    type R = rand_xoshiro::Xoshiro256PlusPlus;
    let mut rng = R::seed_from_u64(40);
    // Half the values within 0..1e6, half up to 4e10 (beyond an i64 of 1e-9 units).
    let value = |rng: &mut R| -> u64 {
        if rng.gen_bool(0.5) {
            rng.gen_range(0..1_000_000)
        } else {
            rng.gen_range(0..40_000_000_000)
        }
    };
    let mut ends: Vec<u64> = Vec::new();
    let mut strategy = |id: u64, rng: &mut R| {
        let mut preds = Vec::new();
        for a in 0..3 {
            let (x, y) = (value(rng), value(rng));
            ends.extend([x, y]);
            preds.push(format!("x{a} >= {} and x{a} <= {}", x.min(y), x.max(y)));
        }
        format!("{id}: {}", preds.join(" and "))
    };
    let mut m = Matcher::new();
    let n = 9_000u64;
    let lines: Vec<String> = (1..=n).map(|id| strategy(id, &mut rng)).collect();
    let later: Vec<String> = (n + 1..=n + 4_000).map(|id| strategy(id, &mut rng)).collect();
    for l in &lines {
        m.insert_text(l).unwrap();
    }
    let events: Vec<Vec<(String, GenValue)>> = (0..60)
        .map(|i| {
            (0..3)
                .map(|a| {
                    let end = ends[rng.gen_range(0..ends.len())];
                    let v = match i % 3 {
                        0 => end,
                        1 => end.saturating_sub(1) + 2 * u64::from(rng.gen_bool(0.5)),
                        _ => value(&mut rng),
                    };
                    (format!("x{a}"), GenValue::Num(v.to_string()))
                })
                .collect()
        })
        .collect();
    let check_all = |m: &mut Matcher| {
        let mut matched = 0;
        for e in &events {
            let e = to_event(m, e);
            let (mut got, mut want) = (Vec::new(), Vec::new());
            m.match_event(&e, &mut got);
            m.match_brute_force(&e, &mut want);
            assert_eq!(got, want);
            matched += got.len();
        }
        matched
    };
    assert!(check_all(&mut m) > 0, "some events match");
    for id in (1..=n).step_by(3) {
        m.remove(id);
    }
    for l in &later {
        m.insert_text(l).unwrap();
    }
    check_all(&mut m);
}
