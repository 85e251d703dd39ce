//! DDS GUIDs: the 16-byte identity of every participant, writer and reader on a domain. The first 12 bytes, the
//! prefix, are those of the entity's participant; the last 4 are the entity id within it.
//!
//! The text form is the one DDS tools use, for example to name a partition after a participant (Cyclone's
//! ddsperf does): four 32-bit words in hex, big-endian, joined by `_`, as in `0110ce76_9ae7e38c_cfeaff15_000001c1`.
//! Its own module so that discovery and endpoints both use it without importing each other.
use std::fmt;
use std::str::FromStr;

/// The entity id of a participant itself (RTPS `ENTITYID_PARTICIPANT`).
pub const PARTICIPANT_ENTITY_ID: u32 = 0x0000_01c1;

/// A DDS GUID: 12 bytes of participant prefix, 4 of entity id.
#[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Guid([u8; 16]);

/// A participant's GUID prefix: the first 12 bytes of the GUID of the participant and of each of its entities.
/// Its text form is the participant's GUID.
#[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GuidPrefix([u8; 12]);

impl Guid {
    pub const fn from_bytes(bytes: [u8; 16]) -> Guid {
        Guid(bytes)
    }

    pub const fn to_bytes(self) -> [u8; 16] {
        self.0
    }

    /// The prefix: the entity's participant.
    pub fn prefix(&self) -> GuidPrefix {
        let mut p = [0u8; 12];
        p.copy_from_slice(&self.0[..12]);
        GuidPrefix(p)
    }

    /// Whether the entity is a writer or reader of a keyed topic, as its entity kind (the GUID's last byte,
    /// RTPS 9.3.1.2) says: `Some(true)` for 0x02 (writer with key) and 0x07 (reader with key), `Some(false)` for
    /// 0x03 and 0x04 (without key), `None` for any other entity. Every DDS implementation announces this, with
    /// or without type information.
    pub fn keyed_endpoint(&self) -> Option<bool> {
        match self.0[15] {
            0x02 | 0x07 => Some(true),
            0x03 | 0x04 => Some(false),
            _ => None,
        }
    }

    /// The entity id within the participant.
    pub fn entity_id(&self) -> u32 {
        u32::from_be_bytes([self.0[12], self.0[13], self.0[14], self.0[15]])
    }
}

/// The RTPS vendor id of Eclipse Cyclone DDS (the first two bytes of its GUID prefixes).
pub const CYCLONE_VENDOR: [u8; 2] = [0x01, 0x10];

impl GuidPrefix {
    pub const fn from_bytes(bytes: [u8; 12]) -> GuidPrefix {
        GuidPrefix(bytes)
    }

    /// The vendor id in the prefix's first two bytes, where every implementation partita has met puts it
    /// (RTPS 9.3.1.5 recommends it): Cyclone 01.10, Fast DDS 01.0f, RTI Connext 01.01.
    pub fn vendor(&self) -> [u8; 2] {
        [self.0[0], self.0[1]]
    }

    pub const fn to_bytes(self) -> [u8; 12] {
        self.0
    }

    /// The GUID of the participant itself.
    pub fn participant(&self) -> Guid {
        let mut g = [0u8; 16];
        g[..12].copy_from_slice(&self.0);
        g[12..].copy_from_slice(&PARTICIPANT_ENTITY_ID.to_be_bytes());
        Guid(g)
    }
}

/// A text that is not a GUID's text form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a GUID (four 8-digit hex words joined by `_`)")]
pub struct NotAGuid(pub String);

/// The four words of a GUID's text form; the fourth is checked for length only, so that any entity's GUID
/// names its participant.
fn words(s: &str) -> Option<[u32; 3]> {
    let words: Vec<&str> = s.split('_').collect();
    if words.len() != 4 || words.iter().any(|w| w.len() != 8) {
        return None;
    }
    let mut out = [0u32; 3];
    for (o, w) in out.iter_mut().zip(&words) {
        *o = u32::from_str_radix(w, 16).ok()?;
    }
    Some(out)
}

impl FromStr for GuidPrefix {
    type Err = NotAGuid;

    /// The participant named by a GUID's text form (of the participant or of one of its entities).
    fn from_str(s: &str) -> Result<Self, NotAGuid> {
        let w = words(s).ok_or_else(|| NotAGuid(s.into()))?;
        let mut p = [0u8; 12];
        for (i, word) in w.iter().enumerate() {
            p[i * 4..i * 4 + 4].copy_from_slice(&word.to_be_bytes());
        }
        Ok(GuidPrefix(p))
    }
}

fn word(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

impl fmt::Display for Guid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = &self.0;
        write!(f, "{:08x}_{:08x}_{:08x}_{:08x}", word(&b[0..]), word(&b[4..]), word(&b[8..]), word(&b[12..]))
    }
}

impl fmt::Display for GuidPrefix {
    /// The participant's GUID.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.participant().fmt(f)
    }
}

impl fmt::Debug for Guid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Guid({self})")
    }
}

impl fmt::Debug for GuidPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = &self.0;
        write!(f, "GuidPrefix({:08x}_{:08x}_{:08x})", word(&b[0..]), word(&b[4..]), word(&b[8..]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PREFIX: [u8; 12] = [0x01, 0x10, 0xce, 0x76, 0x9a, 0xe7, 0xe3, 0x8c, 0xcf, 0xea, 0xff, 0x15];

    #[test]
    fn a_prefix_reads_as_its_participants_guid_and_back() {
        let p = GuidPrefix::from_bytes(PREFIX);
        assert_eq!(p.to_string(), "0110ce76_9ae7e38c_cfeaff15_000001c1");
        assert_eq!("0110ce76_9ae7e38c_cfeaff15_000001c1".parse(), Ok(p));
        assert_eq!(p.participant().prefix(), p);
        assert_eq!(p.participant().entity_id(), PARTICIPANT_ENTITY_ID);
    }

    #[test]
    fn an_entitys_guid_names_its_participant() {
        let mut g = [0u8; 16];
        g[..12].copy_from_slice(&PREFIX);
        g[12..].copy_from_slice(&[0, 0, 0x12, 0x03]);
        let writer = Guid::from_bytes(g);
        assert_eq!(writer.to_string(), "0110ce76_9ae7e38c_cfeaff15_00001203");
        assert_eq!(writer.entity_id(), 0x1203);
        assert_eq!(writer.prefix(), GuidPrefix::from_bytes(PREFIX));
        assert_eq!(writer.to_string().parse::<GuidPrefix>(), Ok(writer.prefix()));
        assert_eq!(writer.keyed_endpoint(), Some(false), "0x03: a writer without key");
        for (kind, keyed) in [(0x02, Some(true)), (0x07, Some(true)), (0x04, Some(false)), (0xc1, None)] {
            g[15] = kind;
            assert_eq!(Guid::from_bytes(g).keyed_endpoint(), keyed, "{kind:#x}");
        }
        assert_eq!(format!("{:?}", writer.prefix()), "GuidPrefix(0110ce76_9ae7e38c_cfeaff15)");
    }

    #[test]
    fn other_names_are_not_guids() {
        for other in ["", "video", "0110ce76_9ae7e38c_cfeaff15", "0110ce7g_9ae7e38c_cfeaff15_000001c1", "0110ce76_9ae7e38c_cfeaff15_000001c1_0"] {
            assert_eq!(other.parse::<GuidPrefix>(), Err(NotAGuid(other.into())), "{other}");
        }
    }
}
