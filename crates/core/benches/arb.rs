//! Criterion benchmark of the arbitrator's per-packet decision cost, next to the naive
//! BTreeMap peer on the same packets. `tickplant bench arb` prints the same figures with
//! their targets and ratios.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use std::hint::black_box;
use tickplant_core::naive::NaiveArbitrator;
use tickplant_core::*;
use tickplant_wire::build::{moldudp64_payload, udp_frame, Flow};

fn frames(n: u64) -> (Vec<Vec<u8>>, Vec<PacketInfo>) {
    let seq = Sequencer::new(SequencerConfig::preset(Protocol::Moldudp64)).unwrap();
    let f: Vec<Vec<u8>> = (0..n)
        .map(|i| {
            udp_frame(
                &Flow::default(),
                0,
                &moldudp64_payload(b"SESSION001", 1 + 2 * i, &[b"0123456789", b"abcdefghij"]),
            )
        })
        .collect();
    let infos = f.iter().map(|x| seq.classify(LinkType::Ethernet, x).unwrap()).collect();
    (f, infos)
}

fn bench(c: &mut Criterion) {
    const N: u64 = 10_000;
    let (f, infos) = frames(N);
    let mut g = c.benchmark_group("arb_in_order_ab");
    g.throughput(Throughput::Elements(2 * N));
    for (name, hr) in [("low_latency", false), ("high_reliability", true)] {
        g.bench_function(name, |b| {
            b.iter_batched_ref(
                || {
                    let cfg = ArbConfig { high_reliability: hr, ..Default::default() };
                    Arbitrator::new(cfg, Sequencer::new(SequencerConfig::preset(Protocol::Moldudp64)).unwrap()).unwrap()
                },
                |arb| {
                    for i in 0..N as usize {
                        for input in 0..2 {
                            black_box(arb.handle_packet(i as u64 * 1000 + input as u64, input, &infos[i], &f[i]));
                            while let Some(r) = arb.poll_hr() {
                                black_box(r.frame);
                            }
                        }
                    }
                },
                BatchSize::LargeInput,
            )
        });
        g.bench_function(format!("{name}_naive_peer"), |b| {
            b.iter_batched_ref(
                || NaiveArbitrator::new(1_000_000),
                |n| {
                    for i in 0..N as usize {
                        for input in 0..2 {
                            black_box(n.handle(
                                i as u64 * 1000 + input as u64,
                                infos[i].seq,
                                infos[i].count,
                                &f[i],
                                hr,
                            ));
                        }
                    }
                },
                BatchSize::LargeInput,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
