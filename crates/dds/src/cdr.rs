//! Standard CDR encoding (OMG XTypes XCDR version 1, "plain" CDR) of serde types.
//!
//! A sample is a 4-byte encapsulation header followed by the body: `00 01 00 00` for little-endian XCDR1
//! (`CDR_LE`), `00 00 00 00` for big-endian. Primitives are aligned to their own size, counted from the end
//! of the header; strings are a u32 length that counts a terminating NUL, the bytes and the NUL; sequences
//! (`Vec`, byte buffers, maps) a u32 element count followed by the elements; fixed arrays (`[T; N]`, tuples)
//! and structs their elements only; enumerations a u32 (the variant index).
//!
//! This is what Cyclone DDS, Fast DDS and RTI Connext put on the wire for final (non-extensible) types without
//! optional members, so samples written here are read by other DDS implementations and the other way round.
//! XCDR2 bodies are refused with a clear error; partita's readers ask for XCDR1 in their QoS.
use serde::de::{self, DeserializeSeed, IntoDeserializer, SeqAccess, Visitor};
use serde::ser::{self, Serialize};

/// Encoding errors.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CdrError {
    #[error("{0}")]
    Message(String),
    #[error("{0} cannot be represented in CDR")]
    Unsupported(&'static str),
    #[error("sample ends early: needed {needed} bytes at offset {offset}, have {len}")]
    Truncated { needed: usize, offset: usize, len: usize },
    #[error("encapsulation {0:#06x} is not plain XCDR1 (CDR_LE 0x0001 or CDR_BE 0x0000)")]
    Encapsulation(u16),
    #[error("string is not valid UTF-8 or lacks its terminating NUL")]
    BadString,
    #[error("{0} trailing bytes after the sample")]
    Trailing(usize),
}

impl ser::Error for CdrError {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        CdrError::Message(msg.to_string())
    }
}
impl de::Error for CdrError {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        CdrError::Message(msg.to_string())
    }
}

type Result<T> = std::result::Result<T, CdrError>;

/// Little-endian XCDR1 header.
pub const CDR_LE: [u8; 4] = [0x00, 0x01, 0x00, 0x00];

/// Encodes `value` as little-endian XCDR1, header included.
pub fn to_vec<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(64);
    to_writer(&mut out, value)?;
    Ok(out)
}

/// Appends the little-endian XCDR1 encoding of `value`, header included, to `out`.
pub fn to_writer<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) -> Result<()> {
    out.extend_from_slice(&CDR_LE);
    let base = out.len();
    value.serialize(&mut Serializer { out, base, keys: None, depth: 0 })
}

/// Appends the key-only encoding of `value` (header included): the top-level struct's fields named in `keys`,
/// in declaration order. This is what a dispose or unregister of a keyed instance carries.
pub fn key_to_writer<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T, keys: &[&str]) -> Result<()> {
    out.extend_from_slice(&CDR_LE);
    let base = out.len();
    value.serialize(&mut Serializer { out, base, keys: Some(keys), depth: 0 })
}

/// Decodes a sample (header included) of either endianness; the whole buffer must be consumed, except up to
/// 3 bytes of padding Cyclone may add to round the size.
pub fn from_slice<'de, T: de::Deserialize<'de>>(data: &'de [u8]) -> Result<T> {
    if data.len() < 4 {
        return Err(CdrError::Truncated { needed: 4, offset: 0, len: data.len() });
    }
    let rep = u16::from_be_bytes([data[0], data[1]]);
    let little = match rep {
        0x0001 => true,
        0x0000 => false,
        other => return Err(CdrError::Encapsulation(other)),
    };
    let body = &data[4..];
    let mut d = Deserializer { data: body, pos: 0, little };
    let v = T::deserialize(&mut d)?;
    let rest = body.len() - d.pos;
    if rest > 3 {
        return Err(CdrError::Trailing(rest));
    }
    Ok(v)
}

struct Serializer<'a> {
    out: &'a mut Vec<u8>,
    base: usize,
    /// When set, only these fields of the top-level struct are written.
    keys: Option<&'a [&'a str]>,
    /// Struct nesting depth: 1 inside the top-level struct.
    depth: usize,
}

impl Serializer<'_> {
    fn align(&mut self, n: usize) {
        let pos = self.out.len() - self.base;
        let pad = (n - pos % n) % n;
        self.out.resize(self.out.len() + pad, 0);
    }
    fn len_prefix(&mut self, len: usize) -> Result<()> {
        let l = u32::try_from(len).map_err(|_| CdrError::Unsupported("a sequence longer than 2^32-1"))?;
        self.align(4);
        self.out.extend_from_slice(&l.to_le_bytes());
        Ok(())
    }
}

macro_rules! ser_prim {
    ($name:ident, $t:ty) => {
        fn $name(self, v: $t) -> Result<()> {
            self.align(std::mem::size_of::<$t>());
            self.out.extend_from_slice(&v.to_le_bytes());
            Ok(())
        }
    };
}

impl<'a, 'b> ser::Serializer for &'a mut Serializer<'b> {
    type Ok = ();
    type Error = CdrError;
    type SerializeSeq = Self;
    type SerializeTuple = Self;
    type SerializeTupleStruct = Self;
    type SerializeTupleVariant = ser::Impossible<(), CdrError>;
    type SerializeMap = Self;
    type SerializeStruct = Self;
    type SerializeStructVariant = ser::Impossible<(), CdrError>;

    fn serialize_bool(self, v: bool) -> Result<()> {
        self.out.push(v as u8);
        Ok(())
    }
    fn serialize_i8(self, v: i8) -> Result<()> {
        self.out.push(v as u8);
        Ok(())
    }
    ser_prim!(serialize_i16, i16);
    ser_prim!(serialize_i32, i32);
    ser_prim!(serialize_i64, i64);
    fn serialize_u8(self, v: u8) -> Result<()> {
        self.out.push(v);
        Ok(())
    }
    ser_prim!(serialize_u16, u16);
    ser_prim!(serialize_u32, u32);
    ser_prim!(serialize_u64, u64);
    ser_prim!(serialize_f32, f32);
    ser_prim!(serialize_f64, f64);
    fn serialize_char(self, v: char) -> Result<()> {
        if !v.is_ascii() {
            return Err(CdrError::Unsupported("a non-ASCII char (IDL char is one byte)"));
        }
        self.out.push(v as u8);
        Ok(())
    }
    fn serialize_str(self, v: &str) -> Result<()> {
        if v.as_bytes().contains(&0) {
            return Err(CdrError::Unsupported("a string containing NUL"));
        }
        self.len_prefix(v.len() + 1)?;
        self.out.extend_from_slice(v.as_bytes());
        self.out.push(0);
        Ok(())
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<()> {
        self.len_prefix(v.len())?;
        self.out.extend_from_slice(v);
        Ok(())
    }
    fn serialize_none(self) -> Result<()> {
        Err(CdrError::Unsupported("an optional member (Option) in XCDR1"))
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Result<()> {
        Err(CdrError::Unsupported("an optional member (Option) in XCDR1"))
    }
    fn serialize_unit(self) -> Result<()> {
        Ok(())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<()> {
        Ok(())
    }
    fn serialize_unit_variant(self, _: &'static str, index: u32, _: &'static str) -> Result<()> {
        self.serialize_u32(index)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _: &'static str, v: &T) -> Result<()> {
        v.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(self, _: &'static str, _: u32, _: &'static str, _: &T) -> Result<()> {
        Err(CdrError::Unsupported("an enum variant carrying data (use a struct with an enum tag)"))
    }
    fn serialize_seq(self, len: Option<usize>) -> Result<Self> {
        let len = len.ok_or(CdrError::Unsupported("a sequence of unknown length"))?;
        self.len_prefix(len)?;
        Ok(self)
    }
    fn serialize_tuple(self, _: usize) -> Result<Self> {
        Ok(self)
    }
    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Self> {
        Ok(self)
    }
    fn serialize_tuple_variant(self, _: &'static str, _: u32, _: &'static str, _: usize) -> Result<Self::SerializeTupleVariant> {
        Err(CdrError::Unsupported("an enum variant carrying data"))
    }
    fn serialize_map(self, len: Option<usize>) -> Result<Self> {
        let len = len.ok_or(CdrError::Unsupported("a map of unknown length"))?;
        self.len_prefix(len)?;
        Ok(self)
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self> {
        self.depth += 1;
        Ok(self)
    }
    fn serialize_struct_variant(self, _: &'static str, _: u32, _: &'static str, _: usize) -> Result<Self::SerializeStructVariant> {
        Err(CdrError::Unsupported("an enum variant carrying data"))
    }
    fn is_human_readable(&self) -> bool {
        false
    }
}

/// The compound serializers whose parts are written in order with nothing between them.
macro_rules! serialize_parts_in_order {
    ($($trait:ident :: $method:ident),*) => {$(
        impl ser::$trait for &mut Serializer<'_> {
            type Ok = ();
            type Error = CdrError;
            fn $method<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<()> {
                v.serialize(&mut **self)
            }
            fn end(self) -> Result<()> {
                Ok(())
            }
        }
    )*};
}
serialize_parts_in_order!(SerializeSeq::serialize_element, SerializeTuple::serialize_element, SerializeTupleStruct::serialize_field);
impl ser::SerializeMap for &mut Serializer<'_> {
    type Ok = ();
    type Error = CdrError;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, k: &T) -> Result<()> {
        k.serialize(&mut **self)
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<()> {
        v.serialize(&mut **self)
    }
    fn end(self) -> Result<()> {
        Ok(())
    }
}
impl ser::SerializeStruct for &mut Serializer<'_> {
    type Ok = ();
    type Error = CdrError;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, name: &'static str, v: &T) -> Result<()> {
        if let (1, Some(keys)) = (self.depth, self.keys) {
            if !keys.contains(&name) {
                return Ok(());
            }
        }
        v.serialize(&mut **self)
    }
    fn end(self) -> Result<()> {
        self.depth -= 1;
        Ok(())
    }
}

struct Deserializer<'de> {
    data: &'de [u8],
    pos: usize,
    little: bool,
}

impl<'de> Deserializer<'de> {
    fn align(&mut self, n: usize) {
        self.pos += (n - self.pos % n) % n;
    }
    fn take(&mut self, n: usize) -> Result<&'de [u8]> {
        let end = self.pos.checked_add(n).filter(|e| *e <= self.data.len()).ok_or(CdrError::Truncated {
            needed: n,
            offset: self.pos,
            len: self.data.len(),
        })?;
        let s = &self.data[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn fixed<const N: usize>(&mut self) -> Result<[u8; N]> {
        self.align(N);
        let mut b = [0u8; N];
        b.copy_from_slice(self.take(N)?);
        if !self.little {
            b.reverse();
        }
        Ok(b)
    }
    fn len(&mut self) -> Result<usize> {
        let n = u32::from_le_bytes(self.fixed::<4>()?) as usize;
        // Every element takes at least one byte, so a count beyond the remaining bytes is corrupt; refusing it
        // here keeps a damaged sample from reserving gigabytes.
        if n > self.data.len() - self.pos.min(self.data.len()) {
            return Err(CdrError::Truncated { needed: n, offset: self.pos, len: self.data.len() });
        }
        Ok(n)
    }
    fn string(&mut self) -> Result<&'de str> {
        let n = self.len()?;
        if n == 0 {
            return Err(CdrError::BadString);
        }
        let raw = self.take(n)?;
        let (text, nul) = raw.split_at(n - 1);
        if nul != [0] {
            return Err(CdrError::BadString);
        }
        std::str::from_utf8(text).map_err(|_| CdrError::BadString)
    }
}

macro_rules! de_prim {
    ($name:ident, $visit:ident, $t:ty) => {
        fn $name<V: Visitor<'de>>(self, v: V) -> Result<V::Value> {
            let b = self.fixed::<{ std::mem::size_of::<$t>() }>()?;
            v.$visit(<$t>::from_le_bytes(b))
        }
    };
}

impl<'de> de::Deserializer<'de> for &mut Deserializer<'de> {
    type Error = CdrError;

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value> {
        Err(CdrError::Unsupported("a self-describing value (CDR carries no type information)"))
    }
    fn deserialize_bool<V: Visitor<'de>>(self, v: V) -> Result<V::Value> {
        match self.take(1)?[0] {
            0 => v.visit_bool(false),
            1 => v.visit_bool(true),
            _ => Err(CdrError::Message("boolean is neither 0 nor 1".into())),
        }
    }
    de_prim!(deserialize_i8, visit_i8, i8);
    de_prim!(deserialize_i16, visit_i16, i16);
    de_prim!(deserialize_i32, visit_i32, i32);
    de_prim!(deserialize_i64, visit_i64, i64);
    de_prim!(deserialize_u8, visit_u8, u8);
    de_prim!(deserialize_u16, visit_u16, u16);
    de_prim!(deserialize_u32, visit_u32, u32);
    de_prim!(deserialize_u64, visit_u64, u64);
    de_prim!(deserialize_f32, visit_f32, f32);
    de_prim!(deserialize_f64, visit_f64, f64);
    fn deserialize_char<V: Visitor<'de>>(self, v: V) -> Result<V::Value> {
        v.visit_char(self.take(1)?[0] as char)
    }
    fn deserialize_str<V: Visitor<'de>>(self, v: V) -> Result<V::Value> {
        v.visit_borrowed_str(self.string()?)
    }
    fn deserialize_string<V: Visitor<'de>>(self, v: V) -> Result<V::Value> {
        self.deserialize_str(v)
    }
    fn deserialize_bytes<V: Visitor<'de>>(self, v: V) -> Result<V::Value> {
        let n = self.len()?;
        v.visit_borrowed_bytes(self.take(n)?)
    }
    fn deserialize_byte_buf<V: Visitor<'de>>(self, v: V) -> Result<V::Value> {
        self.deserialize_bytes(v)
    }
    fn deserialize_option<V: Visitor<'de>>(self, _: V) -> Result<V::Value> {
        Err(CdrError::Unsupported("an optional member (Option) in XCDR1"))
    }
    fn deserialize_unit<V: Visitor<'de>>(self, v: V) -> Result<V::Value> {
        v.visit_unit()
    }
    fn deserialize_unit_struct<V: Visitor<'de>>(self, _: &'static str, v: V) -> Result<V::Value> {
        v.visit_unit()
    }
    fn deserialize_newtype_struct<V: Visitor<'de>>(self, _: &'static str, v: V) -> Result<V::Value> {
        v.visit_newtype_struct(self)
    }
    fn deserialize_seq<V: Visitor<'de>>(self, v: V) -> Result<V::Value> {
        let n = self.len()?;
        v.visit_seq(Elements { de: self, left: n })
    }
    fn deserialize_tuple<V: Visitor<'de>>(self, len: usize, v: V) -> Result<V::Value> {
        v.visit_seq(Elements { de: self, left: len })
    }
    fn deserialize_tuple_struct<V: Visitor<'de>>(self, _: &'static str, len: usize, v: V) -> Result<V::Value> {
        v.visit_seq(Elements { de: self, left: len })
    }
    fn deserialize_map<V: Visitor<'de>>(self, v: V) -> Result<V::Value> {
        let n = self.len()?;
        v.visit_map(Elements { de: self, left: n })
    }
    fn deserialize_struct<V: Visitor<'de>>(self, _: &'static str, fields: &'static [&'static str], v: V) -> Result<V::Value> {
        v.visit_seq(Elements { de: self, left: fields.len() })
    }
    fn deserialize_enum<V: Visitor<'de>>(self, _: &'static str, _: &'static [&'static str], v: V) -> Result<V::Value> {
        let idx = u32::from_le_bytes(self.fixed::<4>()?);
        v.visit_enum(idx.into_deserializer())
    }
    fn deserialize_identifier<V: Visitor<'de>>(self, _: V) -> Result<V::Value> {
        Err(CdrError::Unsupported("an identifier"))
    }
    fn deserialize_ignored_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value> {
        Err(CdrError::Unsupported("skipping a value (CDR carries no type information)"))
    }
    fn is_human_readable(&self) -> bool {
        false
    }
}

struct Elements<'a, 'de> {
    de: &'a mut Deserializer<'de>,
    left: usize,
}

impl<'de> SeqAccess<'de> for Elements<'_, 'de> {
    type Error = CdrError;
    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        seed.deserialize(&mut *self.de).map(Some)
    }
    fn size_hint(&self) -> Option<usize> {
        Some(self.left)
    }
}

impl<'de> de::MapAccess<'de> for Elements<'_, 'de> {
    type Error = CdrError;
    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        seed.deserialize(&mut *self.de).map(Some)
    }
    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value> {
        seed.deserialize(&mut *self.de)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::{Deserialize, Serialize};

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    enum Color {
        Red,
        Green,
        Blue,
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Sample {
        flag: bool,
        id: u64,
        name: String,
        color: Color,
        values: Vec<i16>,
        fixed: [u8; 3],
        ratio: f32,
    }

    #[test]
    fn encodes_known_xcdr1_layout() {
        let s = Sample {
            flag: true,
            id: 0x0102030405060708,
            name: "ab".into(),
            color: Color::Blue,
            values: vec![-1, 2],
            fixed: [9, 8, 7],
            ratio: 1.5,
        };
        let b = to_vec(&s).unwrap();
        #[rustfmt::skip]
        let expect: Vec<u8> = vec![
            0, 1, 0, 0,                         // CDR_LE
            1, 0, 0, 0, 0, 0, 0, 0,             // bool, pad to 8
            8, 7, 6, 5, 4, 3, 2, 1,             // u64
            3, 0, 0, 0, b'a', b'b', 0,          // string "ab" + NUL
            0,                                  // pad to 4
            2, 0, 0, 0,                         // enum Blue
            2, 0, 0, 0, 0xff, 0xff, 2, 0,       // sequence<short>
            9, 8, 7,                            // octet[3]
            0,                                  // pad to 4
            0, 0, 0xc0, 0x3f,                   // 1.5f
        ];
        assert_eq!(b, expect);
        assert_eq!(from_slice::<Sample>(&b).unwrap(), s);
    }

    #[test]
    fn key_only_encoding_keeps_key_fields() {
        #[derive(Serialize)]
        struct K {
            a: u8,
            id: u32,
            inner: (u8, u8),
            name: String,
        }
        let mut b = Vec::new();
        key_to_writer(&mut b, &K { a: 1, id: 5, inner: (2, 3), name: "x".into() }, &["id", "name"]).unwrap();
        assert_eq!(b, vec![0, 1, 0, 0, 5, 0, 0, 0, 2, 0, 0, 0, b'x', 0]);
    }

    #[test]
    fn big_endian_samples_decode() {
        let b = [0u8, 0, 0, 0, 0, 0, 1, 2];
        assert_eq!(from_slice::<u32>(&b).unwrap(), 0x0102);
    }

    #[test]
    fn corrupt_input_is_an_error_not_a_panic() {
        let good = to_vec(&("hello".to_string(), vec![1u32, 2, 3])).unwrap();
        for cut in 0..good.len() - 1 {
            assert!(from_slice::<(String, Vec<u32>)>(&good[..cut]).is_err(), "cut at {cut}");
        }
        let mut huge = good.clone();
        huge[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(from_slice::<(String, Vec<u32>)>(&huge).is_err());
        assert_eq!(from_slice::<u8>(&[0, 7, 0, 0, 1]), Err(CdrError::Encapsulation(7)));
    }

    #[test]
    fn options_and_data_enums_are_refused() {
        assert!(matches!(to_vec(&Some(1u8)), Err(CdrError::Unsupported(_))));
        #[derive(Serialize)]
        enum E {
            A(u8),
        }
        assert!(matches!(to_vec(&E::A(1)), Err(CdrError::Unsupported(_))));
    }
}
