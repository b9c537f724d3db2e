//! Pantheon's merged link log and Mahimahi's mm-link log (one parser): never a panic; columns
//! stay aligned; a stop names the file and line.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let log = analyzer::text::parse_link_log(data, "f");
    assert_eq!(log.departures.len(), log.delay_ms.len());
    for e in [&log.arrivals, &log.departures, &log.opportunities] {
        assert_eq!(e.flow.len(), e.t_ms.len());
        assert_eq!(e.t_ms.len(), e.size.len());
    }
    if let Some(why) = log.stopped {
        assert!(why.starts_with("f:"), "{why}");
    }
});
