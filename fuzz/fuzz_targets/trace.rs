//! Mahimahi trace files: any text gives an error naming the file (and line), or a trace whose
//! values are non-decreasing with a positive period.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match emucal::trace::Trace::parse(text, "t") {
        Ok(t) => {
            assert!(t.opportunities_ms.windows(2).all(|w| w[0] <= w[1]));
            assert!(t.period_ms() > 0);
        }
        Err(e) => assert!(e.to_string().starts_with("t:"), "{e}"),
    }
});
