//! The synthetic video source: a frame clock and a rate-controlled "encoder" that sizes each
//! frame from the bitrate the congestion controller allows. Sans-IO: times are arguments.
//!
//! A real encoder (VP8 in Chromium) is told a target bitrate by the congestion controller and
//! produces frames whose sizes average that bitrate over the frame rate; it never exceeds its
//! own maximum (Chromium's default for a 1080p camera stream is 2.5 Mbit/s). This one produces
//! exactly `min(target, max) / fps` bytes per frame, so the offered load follows the
//! controller's estimate with no encoder noise of its own.

use std::time::{Duration, Instant};

/// RTP clock rate of video, Hz (RFC 3551: 90 kHz for every video payload format).
pub const VIDEO_CLOCK_HZ: u64 = 90_000;

/// One frame to send: its payload size and its RTP timestamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame {
    /// Payload bytes of the frame (≥ 1).
    pub bytes: usize,
    /// RTP timestamp, ticks of [`VIDEO_CLOCK_HZ`] since the first frame.
    pub rtp_ticks: u64,
    /// When the frame was captured (the frame clock's tick it belongs to).
    pub captured: Instant,
}

/// The frame clock and rate control of a synthetic camera and encoder.
#[derive(Debug)]
pub struct Encoder {
    start: Instant,
    fps: u32,
    interval: Duration,
    /// Frames produced so far.
    frames: u64,
    /// What the congestion controller allows, bit/s.
    target_bps: u64,
    /// The encoder's own ceiling, bit/s (`u64::MAX`: none).
    max_bps: u64,
}

impl Encoder {
    /// A source of `fps` frames per second from `start`, first target `initial_bps` (bit/s),
    /// never above `max_bps` (bit/s; `u64::MAX` for none). Panics if `fps` is 0.
    pub fn new(start: Instant, fps: u32, initial_bps: u64, max_bps: u64) -> Self {
        assert!(fps > 0, "a frame rate of 0 frames per second");
        Encoder {
            start,
            fps,
            interval: Duration::from_secs(1) / fps,
            frames: 0,
            target_bps: initial_bps,
            max_bps,
        }
    }

    /// Sets the congestion controller's allowed rate, bit/s (takes effect at the next frame).
    pub fn set_target(&mut self, bps: u64) {
        self.target_bps = bps;
    }

    /// The rate frames are sized for now: `min(target, max)`, bit/s.
    pub fn rate_bps(&self) -> u64 {
        self.target_bps.min(self.max_bps)
    }

    /// When the next frame is due.
    pub fn next_due(&self) -> Instant {
        self.start + self.interval * self.frames as u32
    }

    /// The frame due at or before `now`, if any; frames missed by more than one interval are
    /// skipped (a camera does not queue frames behind a stalled encoder), their time counted.
    pub fn poll(&mut self, now: Instant) -> Option<Frame> {
        let due = self.next_due();
        if now < due {
            return None;
        }
        let behind = (now - due).as_nanos() / self.interval.as_nanos();
        self.frames += behind as u64;
        let captured = self.next_due();
        let index = self.frames;
        self.frames += 1;
        let bytes = (self.rate_bps() / 8 / u64::from(self.fps)).max(1) as usize;
        Some(Frame {
            bytes,
            rtp_ticks: index * VIDEO_CLOCK_HZ / u64::from(self.fps),
            captured,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_average_the_target_and_follow_its_changes() {
        let t0 = Instant::now();
        let mut e = Encoder::new(t0, 60, 1_200_000, u64::MAX);
        let mut bytes = 0;
        let mut frames = 0;
        for ms in 0..1000 {
            if let Some(f) = e.poll(t0 + Duration::from_millis(ms)) {
                bytes += f.bytes;
                frames += 1;
            }
        }
        assert_eq!(frames, 60);
        // 1.2 Mbit/s ÷ 60 fps = 2500 bytes a frame.
        assert_eq!(bytes, 60 * 2500);
        e.set_target(4_800_000);
        let f = e.poll(t0 + Duration::from_millis(1000)).unwrap();
        assert_eq!(f.bytes, 10_000);
        assert_eq!(f.rtp_ticks, 90_000);
    }

    #[test]
    fn the_encoders_ceiling_caps_the_rate() {
        let t0 = Instant::now();
        let mut e = Encoder::new(t0, 30, 100_000_000, 2_500_000);
        assert_eq!(e.rate_bps(), 2_500_000);
        assert_eq!(e.poll(t0).unwrap().bytes, 2_500_000 / 8 / 30);
    }

    #[test]
    fn a_stalled_caller_skips_frames_instead_of_bursting() {
        let t0 = Instant::now();
        let mut e = Encoder::new(t0, 50, 800_000, u64::MAX);
        assert!(e.poll(t0).is_some());
        // 100 ms late: frames at 20, 40, 60, 80 ms are dropped, the one at 100 ms is sent.
        let f = e.poll(t0 + Duration::from_millis(100)).unwrap();
        assert_eq!(f.captured, t0 + Duration::from_millis(100));
        assert_eq!(f.rtp_ticks, 9_000);
        assert!(e.poll(t0 + Duration::from_millis(100)).is_none());
        assert_eq!(e.next_due(), t0 + Duration::from_millis(120));
    }
}
