//! Our binary packet log (`*.ptlog`): any bytes give a header error or the records before the
//! first bad one, never a panic; what is kept fits in the input.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(log) = tunnel::log::parse_log(data) {
        assert!(
            tunnel::log::HEADER_LEN + log.records.len() * tunnel::log::RECORD_LEN <= data.len()
        );
        if log.stopped_at.is_none() {
            assert_eq!(
                (data.len() - tunnel::log::HEADER_LEN) % tunnel::log::RECORD_LEN,
                0
            );
        }
    }
});
