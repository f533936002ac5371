//! Print the (segment, presence map) distribution of a FAST stream.
use tickplant_fast::{for_each, Decoder, Framing, Message, Program};
fn main() {
    let a: Vec<String> = std::env::args().collect();
    let p = Program::from_xml(&std::fs::read_to_string(&a[1]).unwrap()).unwrap();
    let data = std::fs::read(&a[2]).unwrap();
    let mut dec = Decoder::new(&p);
    dec.start_profile();
    let mut msg = Message::new();
    for_each(&mut dec, Framing::U32Le, &data, &mut msg, |_, _| true).unwrap();
    let prof = dec.take_profile();
    let mut v: Vec<_> = prof.counts.iter().collect();
    v.sort_by(|a, b| b.1.cmp(a.1));
    println!("{} pairs", v.len());
    for ((seg, pm), n) in v.iter().take(20) {
        println!("seg {seg} pmap {:032x} {n}", pm);
    }
}
