//! OPRA FAST through the pipeline: a generated feed, impaired onto A and B, arbitrated,
//! decoded and mapped, must deliver exactly the generator's events less the gaps the
//! arbitrator reports; and the real OpenFAST OPRA capture runs through with every message
//! accounted for.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tickplant_core::event::{EventAction, Side};
use tickplant_core::{CountSpec, Endian, FieldSpec, LinkType, Protocol, SequencerConfig};
use tickplant_io::pipeline::{
    self, ConsumerAction, ConsumerSpec, FeedDecoder, Handler, OpraFastSpec, PipelineSpec, Record, SlowPolicy, Stream,
};
use tickplant_io::{Format, FrameWriter};
use tickplant_sim::{generate_opra_fast, impair, ImpairConfig, OpraGenConfig};

fn sequencer() -> SequencerConfig {
    SequencerConfig {
        protocol: Protocol::Custom,
        seq: FieldSpec::new(0, 4, Endian::Big),
        count: CountSpec::Field(FieldSpec::new(4, 1, Endian::Big)),
        accept: Vec::new(),
    }
}

fn spec(inputs: Vec<PathBuf>, xml: &str, reset_per_block: bool, consumers: Vec<ConsumerSpec>) -> PipelineSpec {
    PipelineSpec {
        decoder: FeedDecoder::OpraFast(OpraFastSpec {
            program: Arc::new(tickplant_fast::Program::from_xml(xml).unwrap()),
            skip: tickplant_sim::opra_fast::HEADER_LEN,
            reset_per_block,
            max_series: 10_000,
            profile_blocks: 1_000,
        }),
        inputs,
        sequencer: sequencer(),
        arb: tickplant_core::ArbConfig { start_seq: Some(1), ..Default::default() },
        day: 0.into(),
        timestamps: Default::default(),
        book: Default::default(),
        consumers,
        producer_core: None,
        decode_thread: true,
        decode_core: None,
        latency_sample: 1,
        policy_changes: Vec::new(),
        book_stream: Stream::Hr,
        progress: false,
        snapshot: None,
        metrics: None,
        control: None,
        live: Default::default(),
        outputs: Default::default(),
    }
}

fn collector(name: &str, symbols: Vec<String>, sink: Arc<Mutex<Vec<Record>>>) -> ConsumerSpec {
    ConsumerSpec {
        name: name.into(),
        symbols,
        actions: vec![],
        types: vec![],
        action: ConsumerAction::Handler(Handler::new(move |r: &Record| sink.lock().unwrap().push(*r))),
        policy: SlowPolicy::Backpressure,
        ring: 4096,
        core: None,
        stream: Stream::Hr,
    }
}

fn write(path: &Path, frames: impl IntoIterator<Item = (u64, Vec<u8>)>) {
    let mut w = FrameWriter::create(path, LinkType::Ethernet, Format::PcapNs).unwrap();
    for (t, f) in frames {
        w.write(t, &f).unwrap();
    }
    w.finish().unwrap();
}

#[test]
fn impaired_ab_feed_delivers_the_truth_less_the_reported_gaps() {
    let dir = tempfile::tempdir().unwrap();
    let mut frames = Vec::new();
    let cfg = OpraGenConfig { seed: 3, series: 64, messages: 30_000, ..Default::default() };
    let truth = generate_opra_fast(&cfg, |t, f| frames.push((t, f.to_vec())));
    let ts: Vec<u64> = frames.iter().map(|f| f.0).collect();
    let im = impair(
        &ts,
        &ImpairConfig { seed: 9, loss_a: 0.04, loss_b: 0.04, reorder: 0.02, dup: 0.01, skew_ns: (0, 20_000) },
    );
    let (a, b) = (dir.path().join("a.pcap"), dir.path().join("b.pcap"));
    write(&a, im.a.iter().map(|&(t, i)| (t, frames[i].1.clone())));
    write(&b, im.b.iter().map(|&(t, i)| (t, frames[i].1.clone())));

    let all = Arc::new(Mutex::new(Vec::new()));
    let aaa = Arc::new(Mutex::new(Vec::new()));
    let consumers = vec![collector("all", vec![], all.clone()), collector("aaa", vec!["AAA".into()], aaa.clone())];
    let out = pipeline::run(&spec(vec![a, b], tickplant_sim::opra_fast::TEMPLATES, true, consumers)).unwrap();
    let r = &out.report;
    r.check().unwrap();
    assert_eq!(r.feed, "opra-fast");
    assert_eq!(r.undecodable, 0);
    let o = r.opra_fast.as_ref().unwrap();
    assert_eq!(o.rejected, 0, "{o:?}");
    // The decoder ran with segments specialised from a profile of capture A.
    assert!(o.specialised_segments > 0, "{o:?}");

    // Sequences the arbitrator gave up on.
    let lost: HashSet<u64> = r.gaps.iter().flat_map(|g| g.first_seq..=g.last_seq).collect();
    assert!(!lost.is_empty(), "the impairment should leave gaps where both lines lost a block");
    assert_eq!(r.messages_in + lost.len() as u64, truth.messages);
    let want: Vec<_> = truth.events.iter().filter(|e| !lost.contains(&e.sequence)).collect();
    let got = all.lock().unwrap();
    // Each gap reached the consumer as a gap record, in order: after the records before it
    // and before those after it.
    let gaps: Vec<(usize, &Record)> =
        got.iter().enumerate().filter(|(_, g)| g.event.action == EventAction::Gap).collect();
    let as_reported: Vec<(u64, u64, u64)> = r.gaps.iter().map(|g| (g.first_seq, g.last_seq, g.messages)).collect();
    let as_received: Vec<(u64, u64, u64)> =
        gaps.iter().map(|(_, g)| (g.event.sequence, g.event.order_id, u64::from(g.event.size))).collect();
    assert_eq!(as_received, as_reported);
    for &(i, g) in &gaps {
        let market = |r: &&Record| r.event.action != EventAction::Gap;
        if let Some(before) = got[..i].iter().rev().find(market) {
            assert!(before.event.sequence < g.event.sequence);
        }
        if let Some(after) = got[i + 1..].iter().find(market) {
            assert!(after.event.sequence > g.event.order_id);
        }
    }
    let got: Vec<&Record> = got.iter().filter(|g| g.event.action != EventAction::Gap).collect();
    assert_eq!(got.len(), want.len());
    let mut bbo = BTreeMap::new();
    let mut packet = Vec::new();
    for (g, w) in got.iter().zip(&want) {
        let e = &g.event;
        let (action, side) = (e.action.as_str(), e.side.as_str());
        assert_eq!((e.sequence, e.msg_type, action, side), (w.sequence, w.category, w.action, w.side));
        assert_eq!((e.price, e.size, g.symbol().to_string()), (w.price, w.size, w.root.clone()));
        if e.action == EventAction::Quote {
            let q = bbo.entry(e.instrument_id).or_insert((0, 0));
            if e.side == Side::Bid {
                q.0 = e.price;
            } else {
                q.1 = e.price;
            }
        }
        packet.push(g);
        if e.flags & tickplant_core::event::flags::LAST_IN_PACKET != 0 {
            // A record's BBO is its series' latest quote once its packet is decoded.
            for r in packet.drain(..).filter(|r| r.event.action == EventAction::Quote) {
                assert_eq!((r.bbo.bid_price, r.bbo.ask_price), bbo[&r.event.instrument_id]);
            }
        }
    }
    assert!(packet.is_empty(), "the last event closes its packet");
    // The symbol subscription gets the root's series and nothing else.
    let aaa = aaa.lock().unwrap();
    let want_aaa = want.iter().filter(|e| e.root == "AAA").count();
    assert!(want_aaa > 100);
    // Every gap reaches a consumer whatever its subscription.
    let (gaps, aaa): (Vec<&Record>, Vec<&Record>) = aaa.iter().partition(|r| r.event.action == EventAction::Gap);
    assert_eq!(gaps.len(), r.gaps.len());
    assert_eq!(aaa.len(), want_aaa);
    assert!(aaa.iter().all(|r| r.symbol() == "AAA"));
}

#[test]
fn openfast_opra_capture_is_accounted_for() {
    let base = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/fast/openfast/OPRA");
    let Ok(data) = std::fs::read(base.join("messages.fast")) else {
        eprintln!("skipped: {} absent (an outside checkout has no ../shared)", base.display());
        return;
    };
    let xml = std::fs::read_to_string(base.join("OPRATemplate.xml")).unwrap();
    // Each block of the file becomes one datagram behind the 5-byte sequence header.
    let (mut frames, mut at, mut seq) = (Vec::new(), 0usize, 1u32);
    while at < data.len() {
        let len = u32::from_be_bytes(data[at..at + 4].try_into().unwrap()) as usize;
        let block = &data[at + 4..at + 4 + len];
        let count = tickplant_fast::opra_block(block).count() as u8;
        let mut payload = seq.to_be_bytes().to_vec();
        payload.push(count);
        payload.extend_from_slice(block);
        let mut f = Vec::new();
        tickplant_wire::build::write_udp_frame(&Default::default(), frames.len() as u16, &payload, &mut f);
        frames.push((1_000 * (frames.len() as u64 + 1), f));
        seq += u32::from(count);
        at += 4 + len;
    }
    assert_eq!(frames.len(), 7);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("opra.pcap");
    write(&path, frames);
    let all = Arc::new(Mutex::new(Vec::new()));
    // The capture's dictionary carries from block to block.
    let out = pipeline::run(&spec(vec![path], &xml, false, vec![collector("all", vec![], all.clone())])).unwrap();
    let r = &out.report;
    r.check().unwrap();
    assert_eq!((r.packets_in, r.messages_in, r.decoded, r.undecodable), (7, 63, 63, 0));
    let o = r.opra_fast.as_ref().unwrap();
    assert_eq!(o.messages, 63);
    let all = all.lock().unwrap();
    // The first message is the START OF DAY control message.
    assert_eq!((all[0].event.action, all[0].event.msg_type), (EventAction::Status, b'H'));
    assert_eq!(all.len() as u64, 2 * o.quotes + o.trades + o.status);
}
