//! A plan written into a system file: the file's text with one plan's major frame and windows replaced, its
//! comments and every other key kept.
use crate::windows::PlanWindows;
use partita_system::Duration;
use thiserror::Error;
use toml_edit::{value, ArrayOfTables, DocumentMut, Item, Table};

#[derive(Debug, Error)]
pub enum WriteError {
    #[error("{file}: not TOML ({message}); run `partita check {file}` for the details")]
    Toml { file: String, message: String },
    #[error("{file}: module[{module}] has no plan of CPU {cpu}; name a plan the file has")]
    NoSuchPlan { file: String, module: usize, cpu: usize },
}

/// `text` (the system file `file`) with the plan of CPU `new.cpu` of `module[module]` replaced by `new`'s frame
/// and windows. The plan is found by its `cpu` key (plans need not be in CPU order in a file); a module's only
/// plan may leave `cpu` out.
pub fn with_plan(text: &str, file: &str, module: usize, new: &PlanWindows) -> Result<String, WriteError> {
    let mut doc: DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| WriteError::Toml { file: file.into(), message: e.message().to_string() })?;
    let missing = || WriteError::NoSuchPlan { file: file.into(), module, cpu: new.cpu };
    let plans = doc
        .get_mut("module")
        .and_then(Item::as_array_of_tables_mut)
        .and_then(|m| m.get_mut(module))
        .and_then(|m| m.get_mut("plan"))
        .and_then(Item::as_array_of_tables_mut)
        .ok_or_else(missing)?;
    let only = plans.len() == 1;
    let index = (0..plans.len())
        .find(|&i| match plans.get(i).and_then(|t| t.get("cpu")) {
            Some(c) => c.as_integer() == Some(new.cpu as i64),
            None => only,
        })
        .ok_or_else(missing)?;
    let table = plans.get_mut(index).ok_or_else(missing)?;
    table["major_frame"] = value(Duration::from_nanos(new.major_frame_ns).to_string());
    let mut windows = ArrayOfTables::new();
    for s in &new.slots {
        let mut w = Table::new();
        w["partition"] = value(s.partition.clone());
        w["start"] = value(Duration::from_nanos(s.start).to_string());
        w["duration"] = value(Duration::from_nanos(s.duration).to_string());
        windows.push(w);
    }
    table["window"] = Item::ArrayOfTables(windows);
    Ok(doc.to_string())
}
