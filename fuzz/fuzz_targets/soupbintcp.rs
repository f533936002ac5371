#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| tickplant_fuzz::soupbintcp(data));
