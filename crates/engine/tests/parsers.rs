//! Every duration, count and size a user can give — on the command line, in a config file, in
//! a plan — over the whole range of its type: refused with an error or accepted within its
//! bound, never a panic (issue 49).

use std::time::Duration;

use pantheon_engine::plan::{
    seconds, ExperimentPlan, MAX_DRAIN_TIMEOUT, MAX_FIRST_SIDE_SETUP, MAX_RUNTIME,
};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    /// Any f64, as seconds: an error, or a duration within the bound that a clock can add.
    #[test]
    fn seconds_never_panic(v in any::<f64>()) {
        match seconds(v, "--drain-timeout", MAX_DRAIN_TIMEOUT) {
            Ok(d) => {
                prop_assert!(v.is_finite() && v >= 0.0 && d <= MAX_DRAIN_TIMEOUT);
                let _ = std::time::Instant::now() + d;
            }
            Err(e) => prop_assert!(e.to_string().starts_with("--drain-timeout"), "{e}"),
        }
    }

    /// Any bit pattern of f64 (NaNs, infinities, subnormals, negative zero) as seconds.
    #[test]
    fn seconds_of_any_bits_never_panic(bits in any::<u64>()) {
        let v = f64::from_bits(bits);
        prop_assert_eq!(
            seconds(v, "--runtime", MAX_RUNTIME).is_ok(),
            v.is_finite() && (0.0..=86_400.0).contains(&v)
        );
    }

    /// Any first run id and run count: a plan's check says whether its run ids fit, and the
    /// runs it lists are exactly `run_times` of them when they do.
    #[test]
    fn run_ids_never_overflow(start in any::<u32>(), times in any::<u32>()) {
        let plan = ExperimentPlan {
            schemes: vec!["cubic".into()],
            start_run_id: start,
            run_times: times,
            ..ExperimentPlan::default()
        };
        let fits = u64::from(start) + u64::from(times.saturating_sub(1)) <= u64::from(u32::MAX);
        prop_assert_eq!(plan.check_run_ids().is_ok(), fits);
        if fits && times <= 1000 {
            prop_assert_eq!(plan.run_ids().count(), times as usize);
        }
    }

    /// Any u64 and any f64 as a transfer size (`bytes=N`), a load, and a flow's times in
    /// `--mix`.
    #[test]
    fn sizes_and_flow_times_never_panic(n in any::<u64>(), x in any::<f64>()) {
        let parsed = workload::Workload::parse(&format!("bytes={n}"));
        prop_assert_eq!(
            parsed.is_ok(),
            n >= 1 && n as f64 <= workload::dist::MAX_SIZE_BYTES
        );
        let _ = workload::Workload::parse(&format!("bytes={x}"));
        let _ = workload::Workload::parse(&format!("poisson,load={x},size=exp:{x}"));
        let _ = pantheon_engine::mix::parse_short(&format!("cubic@{x}-{x}+{x}"));
    }

    /// Any durations in a plan: its check errors or accepts, never panics.
    #[test]
    fn plan_durations_never_panic(
        runtime in prop_oneof![any::<u64>(), 0u64..=86_401],
        setup in prop_oneof![any::<u64>(), 0u64..=3_601],
        drain in prop_oneof![any::<u64>(), 0u64..=86_401],
        nanos in 0u32..1_000_000_000,
    ) {
        let plan = ExperimentPlan {
            schemes: vec!["cubic".into()],
            runtime: Duration::new(runtime, nanos),
            first_side_setup: Duration::new(setup, nanos),
            drain_timeout: Duration::new(drain, nanos),
            ..ExperimentPlan::default()
        };
        let registry = pantheon_engine::schemes::Registry::load(None).unwrap();
        let within = Duration::new(runtime, nanos) <= MAX_RUNTIME
            && Duration::new(setup, nanos) <= MAX_FIRST_SIDE_SETUP
            && Duration::new(drain, nanos) <= MAX_DRAIN_TIMEOUT;
        prop_assert_eq!(
            plan.check(&registry).is_ok(),
            within && !(runtime == 0 && nanos == 0)
        );
    }

    /// Any number in every emulator shell that takes one: refused, or within a day (no
    /// emulator clock can wrap), never a panic.
    #[test]
    fn emulator_shells_never_panic(n in any::<u64>(), x in any::<f64>()) {
        let words = |text: String| -> Vec<String> {
            text.split_whitespace().map(str::to_owned).collect()
        };
        for text in [
            format!("mm-delay {n}"),
            format!("mm-delay {x}"),
            format!("mm-loss uplink {x}"),
            format!("mm-onoff uplink {x} {x}"),
            format!("mm-intermittent downlink {x} 1"),
            format!("pt-aggregate uplink {x}"),
            format!("pt-policer uplink {x} {n}"),
            format!(
                "mm-link a b --uplink-queue=codel \
                 --uplink-queue-args=packets={n},target={n},interval={n}"
            ),
            format!("mm-link a b --uplink-queue=pie --uplink-queue-args=bytes={n},qdelay_ref={n},max_burst={n}"),
        ] {
            if let Ok(chain) = emucal::mm::parse_chain(&words(text.clone())) {
                for shell in &chain.shells {
                    if let emucal::mm::Shell::Delay { ms } = shell {
                        prop_assert!(*ms <= emucal::mm::MAX_DELAY_MS, "{text}");
                    }
                }
            }
        }
    }
}
