//! What the pipeline's tests share: a simulated ITCH day written as a MoldUDP64 capture, and
//! the specs around it.
#![allow(dead_code)] // each test file uses its own part

use std::path::{Path, PathBuf};

use tickplant_io::pipeline::{ConsumerAction, ConsumerSpec, PipelineSpec, SlowPolicy, Stream};
use tickplant_sim::ItchDay;

/// A day of `messages` over five symbols (seed `seed`), up to four messages a packet, as an
/// Ethernet capture at `path`; `edit` sees each frame before it is written.
pub fn itch_capture(path: &Path, seed: u64, messages: u64, mut edit: impl FnMut(&mut Vec<u8>)) -> ItchDay {
    let day =
        tickplant_sim::generate_itch(&tickplant_sim::ItchGenConfig { seed, symbols: 5, messages, target_live: 0 });
    let mut w =
        tickplant_io::FrameWriter::create(path, tickplant_core::LinkType::Ethernet, tickplant_io::Format::PcapNs)
            .expect("capture created");
    tickplant_sim::itch::packetize(&day.messages, 1, 4, 0, &Default::default(), |ts, f| {
        let mut f = f.to_vec();
        edit(&mut f);
        w.write(ts, &f).expect("frame written");
    });
    w.finish().expect("capture closed");
    day
}

/// A consumer of everything.
pub fn consumer(name: &str, action: ConsumerAction, policy: SlowPolicy, ring: usize) -> ConsumerSpec {
    ConsumerSpec {
        name: name.into(),
        symbols: vec![],
        actions: vec![],
        types: vec![],
        action,
        policy,
        ring,
        core: None,
        stream: Stream::Hr,
    }
}

/// The ITCH pipeline over one MoldUDP64 capture, defaults elsewhere.
pub fn itch_spec(input: PathBuf, consumers: Vec<ConsumerSpec>) -> PipelineSpec {
    PipelineSpec {
        decoder: Default::default(),
        inputs: vec![input],
        sequencer: tickplant_core::SequencerConfig::preset(tickplant_core::Protocol::Moldudp64),
        arb: Default::default(),
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

/// The capture at `feed` impaired onto `a` and `b` (seed `seed`): 5% loss on each (so that
/// some packets are lost on both: gaps), reordering, duplicates and skew. Returns the feed's
/// frames and what each line got (the impairer's truth).
pub fn impair(feed: &Path, a: &Path, b: &Path, seed: u64) -> (Vec<(u64, Vec<u8>)>, tickplant_sim::Impaired) {
    let mut r = tickplant_io::FrameReader::open(feed).expect("capture opens");
    let mut frames = Vec::new();
    while let Some(f) = r.next_frame().expect("frame reads") {
        frames.push((f.ts_ns, f.data.to_vec()));
    }
    let ts: Vec<u64> = frames.iter().map(|f| f.0).collect();
    let cfg = tickplant_sim::ImpairConfig {
        seed,
        loss_a: 0.05,
        loss_b: 0.05,
        reorder: 0.02,
        dup: 0.01,
        skew_ns: (0, 30_000),
    };
    let im = tickplant_sim::impair(&ts, &cfg);
    for (path, copy) in [(a, &im.a), (b, &im.b)] {
        let mut w = tickplant_io::FrameWriter::create(path, r.link_type(), tickplant_io::Format::PcapNs)
            .expect("capture created");
        for &(t, i) in copy {
            w.write(t, &frames[i].1).expect("frame written");
        }
        w.finish().expect("capture closed");
    }
    (frames, im)
}
