//! Reading the files that PyTorch's `torch.save(model.state_dict(), path)` writes, so
//! that checkpoints of the reference implementation load without Python.
//!
//! Since PyTorch 1.6 such a file is a zip archive of stored (uncompressed) entries:
//! `<name>/data.pkl`, a pickle of the state dict in which every tensor refers by key
//! to a raw storage, and `<name>/data/<key>`, each storage's little-endian bytes. We
//! read that subset: the zip's central directory, the pickle opcodes that
//! `torch.save` emits (protocol 2), and the globals a state dict names. tch's own
//! loader stops with an internal assert on the `OrderedDict` (with its `_metadata`)
//! that `state_dict()` returns, which is why this module exists.

use std::collections::HashMap;
use std::fs;
use std::path::Path;

use tch::{Kind, Tensor};

use crate::error::{Error, Result};

/// Reads the state dict saved at `path`: parameter names with their tensors, in the
/// file's order.
pub fn read_state_dict(path: &Path) -> Result<Vec<(String, Tensor)>> {
    let bytes = fs::read(path).map_err(|source| Error::Io {
        action: "read the checkpoint",
        path: path.to_path_buf(),
        cause: source,
    })?;
    parse_state_dict(&bytes)
        .map_err(|reason| Error::CorruptCheckpoint { path: path.to_path_buf(), reason })
}

/// Parses the bytes of a `torch.save` file; the error says what is wrong with it.
fn parse_state_dict(bytes: &[u8]) -> Result<Vec<(String, Tensor)>, String> {
    if bytes.starts_with(LEGACY_MAGIC) {
        return Err("it was saved in PyTorch's legacy format (before 1.6); load it in a recent \
                    PyTorch and save it again with torch.save, which writes the zip format"
            .into());
    }
    if !bytes.starts_with(b"PK\x03\x04") {
        return Err("it is neither a zip-format torch.save file nor safetensors".into());
    }
    let archive = ZipArchive::parse(bytes)?;
    let pickle_name = archive
        .names()
        .find(|name| name.ends_with("data.pkl"))
        .ok_or("the archive has no data.pkl, so it was not written by torch.save")?
        .to_string();
    let prefix = &pickle_name[..pickle_name.len() - "data.pkl".len()];
    if let Some(order) = archive.entry(&format!("{prefix}byteorder")) {
        if order? != b"little" {
            return Err("its tensors are stored big-endian, which is not supported".into());
        }
    }
    let pickle = archive.entry(&pickle_name).expect("found among the names")?;
    let entries = match Unpickler::new(pickle).run()? {
        Value::Dict(entries) => entries,
        other => return Err(format!("it holds {}, not a state dict", other.describe())),
    };
    let mut tensors = Vec::with_capacity(entries.len());
    for (key, value) in entries {
        let Value::Str(name) = key else {
            return Err(format!("a key of its state dict is {}, not a name", key.describe()));
        };
        let Value::Tensor(layout) = value else {
            return Err(format!(
                "{name} is {}, not a tensor; save model.state_dict()",
                value.describe()
            ));
        };
        let storage = archive
            .entry(&format!("{prefix}data/{}", layout.storage_key))
            .ok_or_else(|| format!("the storage of {name} is missing"))??;
        tensors.push((
            name.clone(),
            layout.materialize(storage).map_err(|why| format!("{name}: {why}"))?,
        ));
    }
    Ok(tensors)
}

/// How the legacy (pre-1.6) format begins: a pickled magic number, protocol 2.
const LEGACY_MAGIC: &[u8] = b"\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19";

/// The stored entries of a zip archive, read through its central directory.
struct ZipArchive<'a> {
    bytes: &'a [u8],
    entries: Vec<ZipEntry>,
}

struct ZipEntry {
    name: String,
    method: u16,
    crc32: u32,
    size: usize,
    local_header: usize,
}

fn u16_at(bytes: &[u8], offset: usize) -> Option<u16> {
    Some(u16::from_le_bytes(bytes.get(offset..offset + 2)?.try_into().ok()?))
}

fn u32_at(bytes: &[u8], offset: usize) -> Option<u32> {
    Some(u32::from_le_bytes(bytes.get(offset..offset + 4)?.try_into().ok()?))
}

const TRUNCATED: &str = "the zip archive is cut short (was the file copied completely?)";

impl<'a> ZipArchive<'a> {
    fn parse(bytes: &'a [u8]) -> Result<Self, String> {
        // The end-of-central-directory record is 22 bytes plus a comment of at most
        // 65535 bytes, so it starts within the last 65557 bytes.
        const END_SIGNATURE: u32 = 0x0605_4b50;
        let search_from = bytes.len().saturating_sub(22 + 65_535);
        let end = (search_from..bytes.len().saturating_sub(21))
            .rev()
            .find(|&offset| u32_at(bytes, offset) == Some(END_SIGNATURE))
            .ok_or(TRUNCATED)?;
        let count = u16_at(bytes, end + 10).ok_or(TRUNCATED)?;
        let directory = u32_at(bytes, end + 16).ok_or(TRUNCATED)?;
        if count == u16::MAX || directory == u32::MAX {
            return Err("it is a zip64 archive (over 4 GB), which is not supported".into());
        }
        let mut entries = Vec::with_capacity(usize::from(count));
        let mut offset = directory as usize;
        for _ in 0..count {
            if u32_at(bytes, offset) != Some(0x0201_4b50) {
                return Err("its zip directory is damaged".into());
            }
            let field16 = |at: usize| u16_at(bytes, offset + at).ok_or(TRUNCATED);
            let field32 = |at: usize| u32_at(bytes, offset + at).ok_or(TRUNCATED);
            let name_length = usize::from(field16(28)?);
            let name_start = offset + 46;
            let name = bytes.get(name_start..name_start + name_length).ok_or(TRUNCATED)?;
            entries.push(ZipEntry {
                name: String::from_utf8_lossy(name).into_owned(),
                method: field16(10)?,
                crc32: field32(16)?,
                size: field32(24)? as usize,
                local_header: field32(42)? as usize,
            });
            offset =
                name_start + name_length + usize::from(field16(30)?) + usize::from(field16(32)?);
        }
        Ok(ZipArchive { bytes, entries })
    }

    fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|entry| entry.name.as_str())
    }

    /// The contents of entry `name`, checked against its CRC; `None` if there is none.
    fn entry(&self, name: &str) -> Option<Result<&'a [u8], String>> {
        let entry = self.entries.iter().find(|entry| entry.name == name)?;
        Some(self.contents(entry))
    }

    fn contents(&self, entry: &ZipEntry) -> Result<&'a [u8], String> {
        if entry.method != 0 {
            return Err(format!(
                "{} is compressed; torch.save stores entries uncompressed",
                entry.name
            ));
        }
        let header = entry.local_header;
        if u32_at(self.bytes, header) != Some(0x0403_4b50) {
            return Err(format!("the zip header of {} is damaged", entry.name));
        }
        // The local header's own name and extra lengths: torch.save pads the extra
        // field there (and only there) to align the data.
        let name_length = usize::from(u16_at(self.bytes, header + 26).ok_or(TRUNCATED)?);
        let extra_length = usize::from(u16_at(self.bytes, header + 28).ok_or(TRUNCATED)?);
        let start = header + 30 + name_length + extra_length;
        let data = self.bytes.get(start..start + entry.size).ok_or(TRUNCATED)?;
        if crc32(data) != entry.crc32 {
            return Err(format!("{} fails its checksum; the file is damaged", entry.name));
        }
        Ok(data)
    }
}

/// The CRC-32 (IEEE) that zip stores for each entry.
fn crc32(data: &[u8]) -> u32 {
    const TABLE: [u32; 256] = {
        let mut table = [0u32; 256];
        let mut index = 0;
        while index < 256 {
            let mut value = index as u32;
            let mut bit = 0;
            while bit < 8 {
                value = if value & 1 == 1 { 0xEDB8_8320 ^ (value >> 1) } else { value >> 1 };
                bit += 1;
            }
            table[index] = value;
            index += 1;
        }
        table
    };
    !data
        .iter()
        .fold(!0u32, |crc, &byte| TABLE[((crc ^ u32::from(byte)) & 0xff) as usize] ^ (crc >> 8))
}

/// Where a tensor's elements lie in its storage, as `_rebuild_tensor_v2` records it.
#[derive(Clone, Debug)]
struct TensorLayout {
    storage_key: String,
    kind: Kind,
    offset: i64,
    size: Vec<i64>,
    stride: Vec<i64>,
}

impl TensorLayout {
    /// A contiguous tensor holding the elements the layout selects from `storage`.
    fn materialize(&self, storage: &[u8]) -> Result<Tensor, String> {
        let element_size = self.kind.elt_size_in_bytes();
        let elements = (storage.len() / element_size) as i64;
        let last =
            self.size.iter().zip(&self.stride).try_fold(self.offset, |last, (&size, &stride)| {
                (size >= 0 && stride >= 0).then(|| last + (size - 1).max(0) * stride)
            });
        let empty = self.size.contains(&0);
        match last {
            Some(last) if empty || (self.offset >= 0 && last < elements) => {}
            _ => return Err("its shape reaches past the end of its storage".into()),
        }
        let flat = Tensor::from_data_size(
            &storage[..elements as usize * element_size],
            &[elements],
            self.kind,
        );
        Ok(flat.as_strided(self.size.as_slice(), self.stride.as_slice(), self.offset).contiguous())
    }
}

/// The values a state dict's pickle builds.
#[derive(Clone, Debug)]
enum Value {
    None,
    // Booleans, floats and byte strings only pass through (requires_grad, say),
    // so their values are not kept.
    Bool,
    Int(i64),
    Float,
    Str(String),
    Bytes,
    Tuple(Vec<Value>),
    List(Vec<Value>),
    Dict(Vec<(Value, Value)>),
    /// A class or function named by module and name.
    Global(String, String),
    /// A storage referred to by key, from `persistent_load`.
    Storage {
        key: String,
        kind: Kind,
    },
    Tensor(TensorLayout),
    /// What the pickle stack keeps between MARK and the opcode that collects it.
    Mark,
}

impl Value {
    fn describe(&self) -> String {
        match self {
            Value::None => "None".into(),
            Value::Bool => "a boolean".into(),
            Value::Int(_) => "an integer".into(),
            Value::Float => "a float".into(),
            Value::Str(text) => format!("the string {text:?}"),
            Value::Bytes => "bytes".into(),
            Value::Tuple(_) => "a tuple".into(),
            Value::List(_) => "a list".into(),
            Value::Dict(_) => "a dict".into(),
            Value::Global(module, name) => format!("{module}.{name}"),
            Value::Storage { .. } => "a storage".into(),
            Value::Tensor(_) => "a tensor".into(),
            Value::Mark => "a mark".into(),
        }
    }
}

/// A pickle machine for the opcodes `torch.save` emits.
struct Unpickler<'a> {
    bytes: &'a [u8],
    position: usize,
    stack: Vec<Value>,
    memo: HashMap<u32, Value>,
}

impl<'a> Unpickler<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Unpickler { bytes, position: 0, stack: Vec::new(), memo: HashMap::new() }
    }

    fn take(&mut self, count: usize) -> Result<&'a [u8], String> {
        let bytes = self
            .bytes
            .get(self.position..self.position + count)
            .ok_or("its data.pkl ends early")?;
        self.position += count;
        Ok(bytes)
    }

    fn byte(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, String> {
        Ok(u16::from_le_bytes(self.take(2)?.try_into().expect("two bytes")))
    }

    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("four bytes")))
    }

    fn line(&mut self) -> Result<String, String> {
        let rest = &self.bytes[self.position..];
        let end = rest.iter().position(|&byte| byte == b'\n').ok_or("its data.pkl ends early")?;
        let text = String::from_utf8_lossy(&rest[..end]).into_owned();
        self.position += end + 1;
        Ok(text)
    }

    fn text(&mut self, length: usize) -> Result<String, String> {
        let bytes = self.take(length)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| "its data.pkl holds invalid UTF-8".into())
    }

    fn pop(&mut self) -> Result<Value, String> {
        self.stack.pop().ok_or_else(|| "its data.pkl is malformed (stack underflow)".into())
    }

    fn top(&mut self) -> Result<&mut Value, String> {
        self.stack.last_mut().ok_or_else(|| "its data.pkl is malformed (empty stack)".into())
    }

    /// Everything above the topmost mark, which is removed.
    fn pop_mark(&mut self) -> Result<Vec<Value>, String> {
        let mark = self
            .stack
            .iter()
            .rposition(|value| matches!(value, Value::Mark))
            .ok_or("its data.pkl is malformed (no mark)")?;
        let items = self.stack.split_off(mark + 1);
        self.stack.pop();
        Ok(items)
    }

    fn memo_get(&self, index: u32) -> Result<Value, String> {
        self.memo.get(&index).cloned().ok_or_else(|| "its data.pkl is malformed (memo)".into())
    }

    fn run(mut self) -> Result<Value, String> {
        loop {
            let opcode = self.byte()?;
            match opcode {
                0x80 => {
                    self.byte()?; // PROTO: the version changes nothing below.
                }
                0x95 => {
                    self.take(8)?; // FRAME: a length hint.
                }
                b'.' => return self.pop(),
                b'(' => self.stack.push(Value::Mark),
                b'N' => self.stack.push(Value::None),
                0x88 | 0x89 => self.stack.push(Value::Bool),
                b'K' => {
                    let value = self.byte()?;
                    self.stack.push(Value::Int(i64::from(value)));
                }
                b'M' => {
                    let value = self.u16()?;
                    self.stack.push(Value::Int(i64::from(value)));
                }
                b'J' => {
                    let value = self.u32()? as i32;
                    self.stack.push(Value::Int(i64::from(value)));
                }
                0x8a => {
                    let length = usize::from(self.byte()?);
                    let bytes = self.take(length)?;
                    if length > 8 {
                        return Err("its data.pkl holds an integer beyond 64 bits".into());
                    }
                    // Little-endian two's complement, sign-extended from its top byte.
                    let negative = bytes.last().is_some_and(|&top| top & 0x80 != 0);
                    let mut full = [if negative { 0xff } else { 0 }; 8];
                    full[..length].copy_from_slice(bytes);
                    self.stack.push(Value::Int(i64::from_le_bytes(full)));
                }
                b'G' => {
                    self.take(8)?;
                    self.stack.push(Value::Float);
                }
                b'X' => {
                    let length = self.u32()? as usize;
                    let text = self.text(length)?;
                    self.stack.push(Value::Str(text));
                }
                0x8c => {
                    let length = usize::from(self.byte()?);
                    let text = self.text(length)?;
                    self.stack.push(Value::Str(text));
                }
                b'U' | b'C' => {
                    let length = usize::from(self.byte()?);
                    self.take(length)?;
                    self.stack.push(Value::Bytes);
                }
                b'T' | b'B' => {
                    let length = self.u32()? as usize;
                    self.take(length)?;
                    self.stack.push(Value::Bytes);
                }
                b')' => self.stack.push(Value::Tuple(Vec::new())),
                b't' => {
                    let items = self.pop_mark()?;
                    self.stack.push(Value::Tuple(items));
                }
                0x85..=0x87 => {
                    let count = usize::from(opcode - 0x84);
                    if self.stack.len() < count {
                        return Err("its data.pkl is malformed (short tuple)".into());
                    }
                    let items = self.stack.split_off(self.stack.len() - count);
                    self.stack.push(Value::Tuple(items));
                }
                b']' => self.stack.push(Value::List(Vec::new())),
                b'l' => {
                    let items = self.pop_mark()?;
                    self.stack.push(Value::List(items));
                }
                b'a' => {
                    let item = self.pop()?;
                    match self.top()? {
                        Value::List(items) => items.push(item),
                        other => return Err(format!("its data.pkl appends to {}", other.describe())),
                    }
                }
                b'e' => {
                    let new_items = self.pop_mark()?;
                    match self.top()? {
                        Value::List(items) => items.extend(new_items),
                        other => return Err(format!("its data.pkl appends to {}", other.describe())),
                    }
                }
                b'}' => self.stack.push(Value::Dict(Vec::new())),
                b'd' => {
                    let items = self.pop_mark()?;
                    self.stack.push(Value::Dict(pairs(items)?));
                }
                b's' => {
                    let value = self.pop()?;
                    let key = self.pop()?;
                    insert(self.top()?, vec![(key, value)])?;
                }
                b'u' => {
                    let items = pairs(self.pop_mark()?)?;
                    insert(self.top()?, items)?;
                }
                b'c' => {
                    let module = self.line()?;
                    let name = self.line()?;
                    self.stack.push(Value::Global(module, name));
                }
                0x93 => {
                    let name = self.pop()?;
                    let module = self.pop()?;
                    match (module, name) {
                        (Value::Str(module), Value::Str(name)) => self.stack.push(Value::Global(module, name)),
                        _ => return Err("its data.pkl is malformed (global)".into()),
                    }
                }
                b'R' | 0x81 => {
                    let arguments = self.pop()?;
                    let callable = self.pop()?;
                    let value = reduce(callable, arguments)?;
                    self.stack.push(value);
                }
                b'b' => {
                    // BUILD sets attributes, such as the state dict's `_metadata` of
                    // module versions, which a3g has no use for.
                    self.pop()?;
                }
                b'Q' => {
                    let id = self.pop()?;
                    let storage = persistent_load(id)?;
                    self.stack.push(storage);
                }
                b'q' => {
                    let index = u32::from(self.byte()?);
                    let value = self.top()?.clone();
                    self.memo.insert(index, value);
                }
                b'r' => {
                    let index = self.u32()?;
                    let value = self.top()?.clone();
                    self.memo.insert(index, value);
                }
                0x94 => {
                    let index = self.memo.len() as u32;
                    let value = self.top()?.clone();
                    self.memo.insert(index, value);
                }
                b'h' => {
                    let index = u32::from(self.byte()?);
                    let value = self.memo_get(index)?;
                    self.stack.push(value);
                }
                b'j' => {
                    let index = self.u32()?;
                    let value = self.memo_get(index)?;
                    self.stack.push(value);
                }
                b'0' => {
                    self.pop()?;
                }
                b'1' => {
                    self.pop_mark()?;
                }
                b'2' => {
                    let value = self.top()?.clone();
                    self.stack.push(value);
                }
                other => {
                    return Err(format!(
                        "its data.pkl uses pickle opcode 0x{other:02x}, which torch.save does not write for a state dict"
                    ))
                }
            }
        }
    }
}

fn pairs(items: Vec<Value>) -> Result<Vec<(Value, Value)>, String> {
    if items.len() % 2 != 0 {
        return Err("its data.pkl is malformed (odd dict items)".into());
    }
    let mut items = items.into_iter();
    let mut result = Vec::new();
    while let (Some(key), Some(value)) = (items.next(), items.next()) {
        result.push((key, value));
    }
    Ok(result)
}

fn insert(target: &mut Value, items: Vec<(Value, Value)>) -> Result<(), String> {
    match target {
        Value::Dict(entries) => {
            entries.extend(items);
            Ok(())
        }
        other => Err(format!("its data.pkl sets items on {}", other.describe())),
    }
}

/// Calls the globals a state dict names: the dict type and PyTorch's tensor rebuilders.
fn reduce(callable: Value, arguments: Value) -> Result<Value, String> {
    let Value::Global(module, name) = callable else {
        return Err(format!("its data.pkl calls {}", callable.describe()));
    };
    let Value::Tuple(arguments) = arguments else {
        return Err("its data.pkl is malformed (call arguments)".into());
    };
    match (module.as_str(), name.as_str(), arguments.as_slice()) {
        ("collections", "OrderedDict", []) => Ok(Value::Dict(Vec::new())),
        ("torch._utils", "_rebuild_tensor_v2", [storage, offset, size, stride, ..]) => {
            let Value::Storage { key, kind } = storage else {
                return Err("a tensor in its data.pkl has no storage".into());
            };
            Ok(Value::Tensor(TensorLayout {
                storage_key: key.clone(),
                kind: *kind,
                offset: integer(offset)?,
                size: integers(size)?,
                stride: integers(stride)?,
            }))
        }
        ("torch._utils", "_rebuild_parameter", [tensor @ Value::Tensor(_), ..]) => {
            Ok(tensor.clone())
        }
        _ => Err(format!(
            "its data.pkl calls {module}.{name}, which a state dict of tensors does not need"
        )),
    }
}

fn integer(value: &Value) -> Result<i64, String> {
    match value {
        Value::Int(value) => Ok(*value),
        other => Err(format!("its data.pkl has {} where an integer belongs", other.describe())),
    }
}

fn integers(value: &Value) -> Result<Vec<i64>, String> {
    match value {
        Value::Tuple(items) => items.iter().map(integer).collect(),
        other => Err(format!("its data.pkl has {} where a shape belongs", other.describe())),
    }
}

/// Resolves `('storage', torch.<Type>Storage, key, location, numel)`; the location (a
/// GPU, say) does not matter, as every tensor is read onto the CPU.
fn persistent_load(id: Value) -> Result<Value, String> {
    let malformed = || "its data.pkl refers to a storage it does not describe".to_string();
    let Value::Tuple(fields) = id else { return Err(malformed()) };
    let [Value::Str(tag), Value::Global(_, type_name), Value::Str(key), ..] = fields.as_slice()
    else {
        return Err(malformed());
    };
    if tag != "storage" {
        return Err(malformed());
    }
    let kind = match type_name.as_str() {
        "FloatStorage" => Kind::Float,
        "DoubleStorage" => Kind::Double,
        "HalfStorage" => Kind::Half,
        "BFloat16Storage" => Kind::BFloat16,
        "LongStorage" => Kind::Int64,
        "IntStorage" => Kind::Int,
        "ShortStorage" => Kind::Int16,
        "CharStorage" => Kind::Int8,
        "ByteStorage" => Kind::Uint8,
        "BoolStorage" => Kind::Bool,
        other => return Err(format!("it stores tensors as {other}, which is not supported")),
    };
    Ok(Value::Storage { key: key.clone(), kind })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The standard check value of CRC-32.
    #[test]
    fn crc32_matches_the_standard() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
    }

    /// LONG1 integers are little-endian two's complement of any width up to eight.
    #[test]
    fn long1_integers_sign_extend() {
        for (bytes, expected) in [
            (&b"\x8a\x01\xff."[..], -1i64),
            (&b"\x8a\x02\x00\x01."[..], 256),
            (&b"\x8a\x00."[..], 0),
            (&b"\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80."[..], i64::MIN),
        ] {
            match Unpickler::new(bytes).run() {
                Ok(Value::Int(value)) => assert_eq!(value, expected, "{bytes:?}"),
                other => panic!("{bytes:?} gave {other:?}"),
            }
        }
    }

    /// Strides and an offset select elements from a storage; a layout reaching past
    /// the storage is refused rather than read out of bounds.
    #[test]
    fn layouts_select_from_storage() {
        let storage: Vec<u8> = (0..6).flat_map(|value| (value as f32).to_le_bytes()).collect();
        let transposed = TensorLayout {
            storage_key: "0".into(),
            kind: Kind::Float,
            offset: 0,
            size: vec![3, 2],
            stride: vec![1, 3],
        };
        let tensor = transposed.materialize(&storage).unwrap();
        assert_eq!(
            Vec::<f32>::try_from(tensor.view([-1])).unwrap(),
            [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]
        );
        let past_end = TensorLayout { offset: 1, ..transposed.clone() };
        assert!(past_end.materialize(&storage).is_err());
        let empty = TensorLayout { size: vec![0, 2], ..transposed };
        assert_eq!(empty.materialize(&storage).unwrap().size(), [0, 2]);
    }

    /// What is not a zip-format torch.save file gets a reason, not a panic.
    #[test]
    fn foreign_bytes_are_refused() {
        let legacy = [LEGACY_MAGIC, b"rest"].concat();
        assert!(parse_state_dict(&legacy).unwrap_err().contains("legacy format"));
        assert!(parse_state_dict(b"{\"json\": 1}").unwrap_err().contains("neither"));
        assert!(parse_state_dict(b"PK\x03\x04 and then nothing")
            .unwrap_err()
            .contains("cut short"));
    }
}
