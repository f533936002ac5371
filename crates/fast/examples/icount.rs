//! Decode a u32le-framed corpus PASSES times with the specialised program, for
//! instruction counts that do not wobble:
//!
//! ```text
//! valgrind --tool=callgrind cargo run --release -p tickplant-fast --example icount -- T.xml FILE PASSES
//! ```
//!
//! Run it with 1 and with N passes: (Ir(N) - Ir(1)) / (N - 1) / messages is the decoder's
//! instructions per message, set-up excluded.

use tickplant_fast::{for_each, Decoder, Framing, Message, Program};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, xml, file, passes] = &args[..] else {
        eprintln!("usage: icount TEMPLATES.xml FILE(u32le) PASSES");
        std::process::exit(2);
    };
    let xml = std::fs::read_to_string(xml).expect("templates");
    let data = std::fs::read(file).expect("corpus");
    let mut p = Program::from_xml(&xml).expect("templates compile");
    p.specialise_for(&data, Framing::U32Le).expect("the corpus decodes");
    let passes: u32 = passes.parse().expect("PASSES is a number");
    let mut dec = Decoder::new(&p);
    let mut msg = Message::new();
    let mut n = 0u64;
    for _ in 0..passes {
        dec.reset();
        n += for_each(&mut dec, Framing::U32Le, &data, &mut msg, |_, _| true).expect("decodes");
    }
    println!("{n} messages decoded");
}
