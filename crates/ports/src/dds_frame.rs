//! A DDS sample carried through a port: what the I/O partition's routing service writes into a channel toward
//! a partition without a network, and what such a partition writes back for the routing service to publish.
//!
//! | offset | what |
//! |---|---|
//! | 0 | magic `PDS1` |
//! | 4 | kind, u8: 0 data, 1 dispose, 2 unregister, 3 dispose and unregister |
//! | 5 | 3 bytes, zero |
//! | 8 | source timestamp, i64 little-endian, ns since the Unix epoch (`i64::MIN`: none) |
//! | 16 | the instance's key hash, 16 bytes (all zero for a topic without a key) |
//! | 32 | the serialized sample: XCDR with its 4-byte encapsulation header, as DDS puts it on the wire (for a dispose or unregister, the key fields only) |
//!
//! The bytes are the DDS wire form: nothing of the sample is decoded on the way, so any type passes, keys and
//! instance life cycle included.

/// The bytes before the serialized sample.
pub const HEADER: usize = 32;
const MAGIC: &[u8; 4] = b"PDS1";

/// What a frame carries: a sample, or a change of its instance's life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SampleKind {
    Data,
    Dispose,
    Unregister,
    DisposeUnregister,
}

impl SampleKind {
    fn code(self) -> u8 {
        match self {
            SampleKind::Data => 0,
            SampleKind::Dispose => 1,
            SampleKind::Unregister => 2,
            SampleKind::DisposeUnregister => 3,
        }
    }
}

/// A DDS sample as a port carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DdsFrame<'a> {
    pub kind: SampleKind,
    pub source_timestamp_ns: Option<i64>,
    pub key_hash: [u8; 16],
    /// The serialized sample (encapsulation header first).
    pub cdr: &'a [u8],
}

/// Bytes that are not a frame.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("{0} bytes are shorter than a DDS frame's {HEADER}-byte header")]
    Short(usize),
    #[error("not a DDS frame (its first bytes are not PDS1)")]
    Magic,
    #[error("unknown sample kind {0}")]
    Kind(u8),
}

impl<'a> DdsFrame<'a> {
    /// The frame's length in bytes.
    pub fn len(&self) -> usize {
        HEADER + self.cdr.len()
    }

    pub fn is_empty(&self) -> bool {
        false
    }

    /// Writes the frame into `out`, which is exactly [`DdsFrame::len`] bytes (a port's message in place).
    pub fn write_into(&self, out: &mut [u8]) {
        out[..4].copy_from_slice(MAGIC);
        out[4] = self.kind.code();
        out[5..8].fill(0);
        out[8..16].copy_from_slice(&self.source_timestamp_ns.unwrap_or(i64::MIN).to_le_bytes());
        out[16..32].copy_from_slice(&self.key_hash);
        out[HEADER..HEADER + self.cdr.len()].copy_from_slice(self.cdr);
    }

    /// The frame as a vector.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = vec![0; self.len()];
        self.write_into(&mut v);
        v
    }

    /// Reads a frame from a port's message (which another partition wrote: everything is checked).
    pub fn read(bytes: &'a [u8]) -> Result<DdsFrame<'a>, FrameError> {
        if bytes.len() < HEADER {
            return Err(FrameError::Short(bytes.len()));
        }
        if &bytes[..4] != MAGIC {
            return Err(FrameError::Magic);
        }
        let kind = match bytes[4] {
            0 => SampleKind::Data,
            1 => SampleKind::Dispose,
            2 => SampleKind::Unregister,
            3 => SampleKind::DisposeUnregister,
            k => return Err(FrameError::Kind(k)),
        };
        let ts = i64::from_le_bytes(bytes[8..16].try_into().expect("8 bytes"));
        Ok(DdsFrame { kind, source_timestamp_ns: (ts != i64::MIN).then_some(ts), key_hash: bytes[16..32].try_into().expect("16 bytes"), cdr: &bytes[HEADER..] })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_reads_back_as_written_and_garbage_is_refused() {
        let f = DdsFrame { kind: SampleKind::Dispose, source_timestamp_ns: Some(-5), key_hash: [7; 16], cdr: &[0, 1, 0, 0, 9] };
        let v = f.to_vec();
        assert_eq!(DdsFrame::read(&v).unwrap(), f);
        let none = DdsFrame { source_timestamp_ns: None, ..f }.to_vec();
        assert_eq!(DdsFrame::read(&none).unwrap().source_timestamp_ns, None);
        assert_eq!(DdsFrame::read(&v[..31]), Err(FrameError::Short(31)));
        let mut bad = v.clone();
        bad[0] = b'X';
        assert_eq!(DdsFrame::read(&bad), Err(FrameError::Magic));
        bad = v;
        bad[4] = 9;
        assert_eq!(DdsFrame::read(&bad), Err(FrameError::Kind(9)));
    }
}
