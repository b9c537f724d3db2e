//! Our binary mm-link log: any bytes give a header error naming a byte, or the events before
//! the first bad record, never a panic; converting them to text never panics either.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match emucal::linklog::read_binary(data) {
        Ok(log) => {
            assert!(log.events.len() * emucal::linklog::RECORD_BYTES <= data.len());
            let _ = emucal::linklog::to_text(&log);
        }
        Err(e) => assert!(e.starts_with("byte "), "{e}"),
    }
});
