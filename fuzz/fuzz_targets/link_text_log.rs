//! Pantheon's merged link log and Mahimahi's mm-link log (one parser): never a panic; columns
//! stay aligned; a stop names the file and line; and feeding the same bytes in two pieces cut
//! anywhere (as the streaming reader does) gives the same log.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let log = analyzer::text::parse_link_log(data, "f");
    assert_eq!(log.departures.len(), log.delay_ms.len());
    for e in [&log.arrivals, &log.departures, &log.opportunities] {
        assert_eq!(e.flow.len(), e.t_ms.len());
        assert_eq!(e.t_ms.len(), e.size.len());
    }
    if let Some(why) = &log.stopped {
        assert!(why.starts_with("f:"), "{why}");
    }
    let cut = data.first().map_or(0, |&b| b as usize % (data.len() + 1));
    let mut p = analyzer::text::LinkLogParser::new("f");
    if p.feed(&data[..cut]) {
        p.feed(&data[cut..]);
    }
    let pieces = p.finish();
    // NaN fields (e.g. a "NaN" time) compare unequal; compare the debug text instead.
    assert_eq!(format!("{pieces:?}"), format!("{log:?}"));
});
