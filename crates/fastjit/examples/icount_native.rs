//! Decode a u32le-framed corpus PASSES times with the specialised program and its kernels
//! as native code, for instruction counts (see tickplant-fast's `icount` example).

use tickplant_fast::{for_each, Decoder, Framing, Message, Program};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, xml, file, passes] = &args[..] else {
        eprintln!("usage: icount_native TEMPLATES.xml FILE(u32le) PASSES");
        std::process::exit(2);
    };
    let xml = std::fs::read_to_string(xml).expect("templates");
    let data = std::fs::read(file).expect("corpus");
    let mut p = Program::from_xml(&xml).expect("templates compile");
    p.specialise_for(&data, Framing::U32Le).expect("the corpus decodes");
    let jit = tickplant_fast_jit::JitKernels::compile(&p).expect("kernels compile");
    let passes: u32 = passes.parse().expect("PASSES is a number");
    let mut dec = Decoder::new(&p);
    dec.set_native(Some(&jit)).expect("made for this program");
    let mut msg = Message::new();
    let mut n = 0u64;
    for _ in 0..passes {
        dec.reset();
        n += for_each(&mut dec, Framing::U32Le, &data, &mut msg, |_, _| true).expect("decodes");
    }
    println!("{n} messages decoded");
}
