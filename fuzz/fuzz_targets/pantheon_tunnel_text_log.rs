//! Pantheon's tunnel text log: any bytes give a header error naming line 1, or the records
//! before the first bad line (named with its line), never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match analyzer::text::parse_tunnel_log(data, "f") {
        Ok(log) => {
            assert_eq!(log.t_ms.len(), log.uid.len());
            assert_eq!(log.uid.len(), log.size.len());
            let lines = data.split(|&b| b == b'\n').count();
            assert!(log.t_ms.len() < lines.max(1));
            if let Some(why) = log.stopped {
                assert!(why.starts_with("f:"), "{why}");
            }
        }
        Err(e) => assert_eq!(e.line, 1),
    }
});
