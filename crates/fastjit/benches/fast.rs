//! FAST decode of the mFAST corpus (`../shared/data/fast/mfast/complex30000.dat`, 30,001
//! messages): tickplant's engine, generic, with specialised segments run by the decoder's
//! kernel loop and with those kernels as native code (the figure the target is judged
//! on), next to
//! rs-fastlib (`fastlib` on crates.io, the Rust FAST decoder in the open) in the same run,
//! and the reference figures for mFAST (measured on this machine, not runnable
//! here: no C++ toolchain dependency in this project).
//!
//! Both decoders get each message's bytes (framing done once, outside the timing) and
//! deliver every value to their output: tickplant into its `Message` record, fastlib into
//! a message factory that counts values (the cheapest consumer its API allows).
//!
//! `cargo bench -p tickplant-fast-jit --bench fast` (TICKPLANT_BENCH_ROUNDS=N for another count).

use std::hint::black_box;
use std::time::Instant;

use tickplant_fast::{for_each, Decoder, Framing, Message, Program};
use tickplant_fast_jit::JitKernels;

struct Count(u64);

impl fastlib::MessageFactory for Count {
    fn start_template(&mut self, _: u32, _: &str) {}
    fn stop_template(&mut self) {}
    fn set_value(&mut self, _: u32, _: &str, v: Option<fastlib::Value>) {
        self.0 += u64::from(v.is_some());
    }
    fn start_sequence(&mut self, _: u32, _: &str, _: u32) {}
    fn start_sequence_item(&mut self, _: u32) {}
    fn stop_sequence_item(&mut self) {}
    fn stop_sequence(&mut self) {}
    fn start_group(&mut self, _: &str) {}
    fn stop_group(&mut self) {}
    fn start_template_ref(&mut self, _: &str, _: bool) {}
    fn stop_template_ref(&mut self) {}
}

/// A target's verdict: `yes` or `no`; a debug build (`./tp test`'s smokes run the test build)
/// is not judged, as its figures say nothing of the release build's.
fn judge(met: bool, yes: &'static str, no: &'static str) -> &'static str {
    if cfg!(debug_assertions) {
        "not judged (debug build)"
    } else if met {
        yes
    } else {
        no
    }
}

fn main() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/fast/mfast");
    let (Ok(xml), Ok(data)) =
        (std::fs::read_to_string(dir.join("example.xml")), std::fs::read(dir.join("complex30000.dat")))
    else {
        println!("fast bench skipped: {} absent", dir.display());
        return;
    };
    let rounds: usize = std::env::var("TICKPLANT_BENCH_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(20);
    let mut program = Program::from_xml(&xml).expect("templates");
    let mut frames = Vec::new();
    let mut values = 0u64;
    {
        let mut d = Decoder::new(&program);
        let mut m = Message::new();
        for_each(&mut d, Framing::U32Le, &data, &mut m, |m, pos| {
            frames.push((pos.offset, pos.len));
            values += m.value_count(&program) as u64;
            true
        })
        .expect("corpus decodes");
    }
    let n = frames.len() as f64;
    let time = |f: &mut dyn FnMut()| -> f64 {
        let mut best = f64::MAX;
        for _ in 0..rounds {
            let t = Instant::now();
            f();
            best = best.min(t.elapsed().as_secs_f64());
        }
        best * 1e9 / n
    };
    let ours = |p: &Program, native: Option<&JitKernels>| {
        let mut d = Decoder::new(p);
        if let Some(n) = native {
            d.set_native(Some(n)).expect("made for this program");
        }
        let mut m = Message::new();
        time(&mut || {
            d.reset();
            for &(o, l) in &frames {
                black_box(d.decode(black_box(&data[o..o + l]), &mut m).expect("decodes"));
            }
        })
    };
    let generic = ours(&program, None);
    program.specialise_for(&data, Framing::U32Le).expect("profile");
    let special = ours(&program, None);
    let jit = JitKernels::compile(&program).expect("the kernels compile");
    let native = ours(&program, Some(&jit));
    // fastlib rejects an optional decimal whose exponent has `<default/>` without a value
    // (it checks before the exponent takes the field's presence). With value="0" it decodes
    // this corpus identically: every NetChgPrevDay exponent in it is present. The value
    // counts printed below agree.
    let peer_xml = xml.replace("<exponent>\n\t\t\t\t\t<default/>", "<exponent>\n\t\t\t\t\t<default value=\"0\"/>");
    assert_ne!(peer_xml, xml, "the NetChgPrevDay exponent patch applies");
    let mut peer = fastlib::Decoder::new_from_xml(&peer_xml).expect("fastlib loads the templates");
    let mut count = Count(0);
    let mut all = 0u64;
    {
        let mut d = Decoder::new(&program);
        let mut m = Message::new();
        for &(o, l) in &frames {
            d.decode(&data[o..o + l], &mut m).expect("decodes");
            all += m
                .entries
                .iter()
                .filter(|e| {
                    !matches!(e.value, tickplant_fast::Value::Element { .. } | tickplant_fast::Value::Sequence { .. })
                })
                .count() as u64;
            peer.decode_slice(&data[o..o + l], &mut count).expect("fastlib decodes");
        }
        println!("values per pass, constants included: tickplant {all}, fastlib {}", count.0);
    }
    let fastlib_ns = time(&mut || {
        peer.reset();
        for &(o, l) in &frames {
            peer.decode_slice(black_box(&data[o..o + l]), &mut count).expect("fastlib decodes");
        }
    });
    println!(
        "FAST decode, mFAST complex30000 ({} messages, {:.1} values each, constants excluded), best of {rounds}:",
        frames.len(),
        values as f64 / n
    );
    println!("  tickplant generic      {generic:8.1} ns/message  {:6.0} M values/s", values as f64 / n / generic * 1e3);
    println!("  tickplant specialised  {special:8.1} ns/message  {:6.0} M values/s", values as f64 / n / special * 1e3);
    println!("  tickplant native       {native:8.1} ns/message  {:6.0} M values/s", values as f64 / n / native * 1e3);
    println!(
        "  rs-fastlib 0.3         {fastlib_ns:8.1} ns/message  -> tickplant is {:.1}x faster (native, same run; {:.1}x with the decoder's own kernels)",
        fastlib_ns / native,
        fastlib_ns / special
    );
    println!(
        "  mFAST (issue's figures): generated code 358 ns ({:.2}x), runtime templates 638 ns ({:.2}x); targets <= 180 ns: {}, >= 300 M values/s: {}",
        358.0 / native,
        638.0 / native,
        judge(native <= 180.0, "met", "NOT met"),
        judge(values as f64 / n / native * 1e3 >= 300.0, "met", "NOT met")
    );
}
