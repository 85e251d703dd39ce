//! DDS types from Rust types.
//!
//! A Rust type that derives serde's `Serialize` and `Deserialize` becomes a DDS topic type by implementing
//! [`TopicType`] (a name and its key fields). Its structure is traced with `serde-reflection` and declared to
//! Cyclone DDS as an XTypes dynamic type (final extensibility), so that Cyclone knows the members, computes key
//! hashes from the serialized sample and announces complete type information during discovery. Samples are
//! encoded by [`crate::cdr`] as XCDR1, which is what that type declaration describes.
use crate::error::{check, cstring, DdsError, Result};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_reflection::{ContainerFormat, Format, Registry, Samples, Tracer, TracerConfig};
use std::ffi::CString;

/// A Rust type usable as a DDS topic type.
pub trait TopicType: Serialize + DeserializeOwned + Send + 'static {
    /// The DDS type name, an IDL scoped name such as `partita::bench::Request`.
    fn type_name() -> &'static str;
    /// Names of the top-level fields that form the key, in declaration order; empty for a keyless type.
    fn key_fields() -> &'static [&'static str] {
        &[]
    }
}

/// The traced shape of a topic type, ready to be declared to Cyclone.
#[derive(Debug, Clone)]
pub struct TypeShape {
    pub type_name: String,
    pub keys: Vec<String>,
    root: String,
    registry: Registry,
}

impl TypeShape {
    /// Traces `T` with serde-reflection.
    pub fn of<T: TopicType>() -> Result<Self> {
        let err = |reason: String| DdsError::Type { type_name: T::type_name().into(), reason };
        // A tracing pass explores one more variant of each enum nested in T, and marks the enum incomplete while
        // variants remain; a pass revisits a still-marked enum only at its first variant. So: learn the enum
        // names from one pass, then repeat passes, clearing the marks in between, until none is left.
        let samples = Samples::new();
        let enums: Vec<String> = {
            let mut t = Tracer::new(TracerConfig::default());
            t.trace_type_once::<T>(&samples).map_err(|e| err(format!("cannot trace: {e}")))?;
            t.registry_unchecked()
                .into_iter()
                .filter(|(_, f)| matches!(f, ContainerFormat::Enum(_)))
                .map(|(n, _)| n)
                .collect()
        };
        let mut tracer = Tracer::new(TracerConfig::default());
        let mut format = Format::Unit;
        for _ in 0..256 {
            format = tracer.trace_type_once::<T>(&samples).map_err(|e| err(format!("cannot trace: {e}")))?.0;
            let mut incomplete = false;
            for name in &enums {
                incomplete |= tracer.check_incomplete_enum(name).is_some();
            }
            if !incomplete {
                break;
            }
        }
        let registry = tracer.registry().map_err(|e| err(format!("incomplete trace: {e}")))?;
        let root = match format {
            Format::TypeName(n) => n,
            other => return Err(err(format!("a topic type must be a struct, found {other:?}"))),
        };
        match registry.get(&root) {
            Some(ContainerFormat::Struct(fields)) => {
                for k in T::key_fields() {
                    if !fields.iter().any(|f| f.name == *k) {
                        return Err(err(format!("key field {k:?} is not a field of the struct")));
                    }
                }
            }
            _ => return Err(err("a topic type must be a struct with named fields".into())),
        }
        Ok(TypeShape {
            type_name: T::type_name().into(),
            keys: T::key_fields().iter().map(|s| s.to_string()).collect(),
            root,
            registry,
        })
    }

    pub fn is_keyed(&self) -> bool {
        !self.keys.is_empty()
    }

    /// Scoped name for a nested container: the root type's scope plus the Rust name.
    fn scoped(&self, name: &str) -> String {
        match self.type_name.rfind("::") {
            Some(i) => format!("{}::{}", &self.type_name[..i], name),
            None => name.to_string(),
        }
    }
}

use cyclors::*;

/// A dynamic type under construction; unreferenced on drop unless handed over to Cyclone.
struct Dyn(Option<dds_dynamic_type_t>);

impl Dyn {
    fn take(mut self) -> dds_dynamic_type_t {
        self.0.take().expect("dynamic type taken twice")
    }
    fn get(&mut self) -> &mut dds_dynamic_type_t {
        self.0.as_mut().expect("dynamic type taken")
    }
}

impl Drop for Dyn {
    fn drop(&mut self) {
        if let Some(mut t) = self.0.take() {
            // SAFETY: we hold the only reference to a type created by dds_dynamic_type_create.
            unsafe {
                dds_dynamic_type_unref(&mut t);
            }
        }
    }
}

fn prim(kind: dds_dynamic_type_kind_t) -> dds_dynamic_type_spec_t {
    dds_dynamic_type_spec_t {
        kind: dds_dynamic_type_spec_kind_DDS_DYNAMIC_TYPE_KIND_PRIMITIVE,
        type_: dds_dynamic_type_spec__bindgen_ty_1 { primitive: kind },
    }
}

fn defined(t: Dyn) -> dds_dynamic_type_spec_t {
    dds_dynamic_type_spec_t {
        kind: dds_dynamic_type_spec_kind_DDS_DYNAMIC_TYPE_KIND_DEFINITION,
        type_: dds_dynamic_type_spec__bindgen_ty_1 { type_: t.take() },
    }
}

fn unset() -> dds_dynamic_type_spec_t {
    // SAFETY: an all-zero spec is DDS_DYNAMIC_TYPE_KIND_UNSET, the "no type" value Cyclone expects.
    unsafe { std::mem::zeroed() }
}

struct Builder<'a> {
    shape: &'a TypeShape,
    entity: dds_entity_t,
    /// Names kept alive until registration: Cyclone copies them, but only when the type is created.
    names: Vec<CString>,
    depth: usize,
}

impl Builder<'_> {
    fn err(&self, reason: String) -> DdsError {
        DdsError::Type { type_name: self.shape.type_name.clone(), reason }
    }

    fn create(&mut self, kind: dds_dynamic_type_kind_t, name: &str, f: impl FnOnce(&mut dds_dynamic_type_descriptor_t)) -> Result<Dyn> {
        let cname = cstring("type name", name)?;
        // SAFETY: a zeroed descriptor is the documented "all optional fields unset" value.
        let mut d: dds_dynamic_type_descriptor_t = unsafe { std::mem::zeroed() };
        d.kind = kind;
        d.name = cname.as_ptr();
        d.base_type = unset();
        d.discriminator_type = unset();
        d.element_type = unset();
        d.key_element_type = unset();
        f(&mut d);
        // SAFETY: the descriptor's pointers (name, bounds) are valid for this call; ownership of element types
        // passes to the new type as documented.
        let t = unsafe { dds_dynamic_type_create(self.entity, d) };
        self.names.push(cname);
        check(t.ret, "dds_dynamic_type_create", || format!("type {name}"))?;
        Ok(Dyn(Some(t)))
    }

    fn spec(&mut self, f: &Format) -> Result<dds_dynamic_type_spec_t> {
        self.depth += 1;
        if self.depth > 32 {
            return Err(self.err("nesting deeper than 32 levels (recursive type?)".into()));
        }
        let s = match f {
            Format::Bool => prim(dds_dynamic_type_kind_DDS_DYNAMIC_BOOLEAN),
            Format::I8 => prim(dds_dynamic_type_kind_DDS_DYNAMIC_INT8),
            Format::I16 => prim(dds_dynamic_type_kind_DDS_DYNAMIC_INT16),
            Format::I32 => prim(dds_dynamic_type_kind_DDS_DYNAMIC_INT32),
            Format::I64 => prim(dds_dynamic_type_kind_DDS_DYNAMIC_INT64),
            Format::U8 => prim(dds_dynamic_type_kind_DDS_DYNAMIC_BYTE),
            Format::U16 => prim(dds_dynamic_type_kind_DDS_DYNAMIC_UINT16),
            Format::U32 => prim(dds_dynamic_type_kind_DDS_DYNAMIC_UINT32),
            Format::U64 => prim(dds_dynamic_type_kind_DDS_DYNAMIC_UINT64),
            Format::F32 => prim(dds_dynamic_type_kind_DDS_DYNAMIC_FLOAT32),
            Format::F64 => prim(dds_dynamic_type_kind_DDS_DYNAMIC_FLOAT64),
            Format::Char => prim(dds_dynamic_type_kind_DDS_DYNAMIC_CHAR8),
            Format::Str => defined(self.create(dds_dynamic_type_kind_DDS_DYNAMIC_STRING8, "string", |_| {})?),
            Format::Bytes => self.sequence(&Format::U8)?,
            Format::Seq(inner) => self.sequence(inner)?,
            Format::TupleArray { content, size } => {
                let elem = self.spec(content)?;
                let bound = [u32::try_from(*size).map_err(|_| self.err("array too long".into()))?];
                defined(self.create(dds_dynamic_type_kind_DDS_DYNAMIC_ARRAY, "array", |d| {
                    d.element_type = elem;
                    d.num_bounds = 1;
                    d.bounds = bound.as_ptr();
                })?)
            }
            Format::TypeName(name) => {
                let name = name.clone();
                defined(self.container(&name)?)
            }
            other => return Err(self.err(format!("{other:?} has no DDS equivalent here (use bool, integers, floats, String, Vec, arrays, structs, unit enums)"))),
        };
        self.depth -= 1;
        Ok(s)
    }

    fn sequence(&mut self, inner: &Format) -> Result<dds_dynamic_type_spec_t> {
        let elem = self.spec(inner)?;
        Ok(defined(self.create(dds_dynamic_type_kind_DDS_DYNAMIC_SEQUENCE, "sequence", |d| d.element_type = elem)?))
    }

    fn container(&mut self, rust_name: &str) -> Result<Dyn> {
        let fmt = self
            .shape
            .registry
            .get(rust_name)
            .cloned()
            .ok_or_else(|| self.err(format!("no traced format for {rust_name}")))?;
        let is_root = rust_name == self.shape.root;
        let dds_name = if is_root { self.shape.type_name.clone() } else { self.shape.scoped(rust_name) };
        match fmt {
            ContainerFormat::Struct(fields) => {
                let mut t = self.create(dds_dynamic_type_kind_DDS_DYNAMIC_STRUCTURE, &dds_name, |_| {})?;
                // SAFETY: t is a live type in the CONSTRUCTING state.
                let r = unsafe {
                    dds_dynamic_type_set_extensibility(t.get(), dds_dynamic_type_extensibility_DDS_DYNAMIC_TYPE_EXT_FINAL)
                };
                check(r, "dds_dynamic_type_set_extensibility", || dds_name.clone())?;
                for (id, field) in fields.iter().enumerate() {
                    let spec = self.spec(&field.value)?;
                    let fname = cstring("field name", &field.name)?;
                    let m = dds_dynamic_member_descriptor_t {
                        name: fname.as_ptr(),
                        id: id as u32,
                        type_: spec,
                        default_value: std::ptr::null_mut(),
                        index: DDS_DYNAMIC_MEMBER_INDEX_END,
                        num_labels: 0,
                        labels: std::ptr::null_mut(),
                        default_label: false,
                    };
                    // SAFETY: the member's name outlives the call; the member type's ownership passes to t.
                    let r = unsafe { dds_dynamic_type_add_member(t.get(), m) };
                    check(r, "dds_dynamic_type_add_member", || format!("{dds_name}.{}", field.name))?;
                    if is_root && self.shape.keys.contains(&field.name) {
                        // SAFETY: the member with this id was just added to t.
                        let r = unsafe { dds_dynamic_member_set_key(t.get(), id as u32, true) };
                        check(r, "dds_dynamic_member_set_key", || format!("{dds_name}.{}", field.name))?;
                    }
                }
                Ok(t)
            }
            ContainerFormat::NewTypeStruct(inner) => Err(self.err(format!(
                "{rust_name} is a newtype struct ({inner:?}); use a struct with named fields or the inner type"
            ))),
            ContainerFormat::Enum(variants) => {
                let mut t = self.create(dds_dynamic_type_kind_DDS_DYNAMIC_ENUMERATION, &dds_name, |_| {})?;
                for (idx, v) in variants.iter() {
                    if !matches!(v.value, serde_reflection::VariantFormat::Unit) {
                        return Err(self.err(format!("enum {rust_name} variant {} carries data; only unit variants map to an IDL enum", v.name)));
                    }
                    let lit = cstring("enum literal", &v.name)?;
                    let value = dds_dynamic_enum_literal_value_t {
                        value_kind: dds_dynamic_type_enum_value_kind_DDS_DYNAMIC_ENUM_LITERAL_VALUE_EXPLICIT,
                        value: *idx as i32,
                    };
                    // SAFETY: the literal's name outlives the call.
                    let r = unsafe { dds_dynamic_type_add_enum_literal(t.get(), lit.as_ptr(), value, *idx == 0) };
                    check(r, "dds_dynamic_type_add_enum_literal", || format!("{dds_name}::{}", v.name))?;
                }
                Ok(t)
            }
            other => Err(self.err(format!("{rust_name} ({other:?}) has no DDS equivalent here"))),
        }
    }
}

/// Registers the shape as a dynamic type in the participant's domain and creates the topic descriptor Cyclone
/// derives from it. The descriptor must be freed with `dds_delete_topic_descriptor`.
pub(crate) fn topic_descriptor(shape: &TypeShape, participant: dds_entity_t) -> Result<*mut dds_topic_descriptor_t> {
    let mut b = Builder { shape, entity: participant, names: Vec::new(), depth: 0 };
    let root = shape.root.clone();
    let mut t = b.container(&root)?;
    let mut info: *mut ddsi_typeinfo = std::ptr::null_mut();
    // SAFETY: t is a complete type in the CONSTRUCTING state; on success Cyclone allocates `info` for us.
    let r = unsafe { dds_dynamic_type_register(t.get(), &mut info) };
    check(r, "dds_dynamic_type_register", || shape.type_name.clone())?;
    let mut desc: *mut dds_topic_descriptor_t = std::ptr::null_mut();
    // SAFETY: the type was registered in this participant's domain just now, so a local lookup with no wait
    // finds it; info is freed right after.
    let r = unsafe {
        let r = dds_create_topic_descriptor(dds_find_scope_DDS_FIND_SCOPE_LOCAL_DOMAIN, participant, info as *const _, 0, &mut desc);
        dds_free_typeinfo(info as *mut _);
        r
    };
    check(r, "dds_create_topic_descriptor", || shape.type_name.clone())?;
    drop(t);
    Ok(desc)
}
