//! Reading the files that PyTorch's `torch.save(model.state_dict(), path)` writes, so
//! that checkpoints of the reference implementation load without Python.
//!
//! Since PyTorch 1.6 such a file is a zip archive of stored (uncompressed) entries:
//! `<name>/data.pkl`, a pickle of the state dict in which every tensor refers by key
//! to a raw storage, and `<name>/data/<key>`, each storage's little-endian bytes.
//! Before, `torch.save` wrote its legacy format, which rl_a3c_pytorch's checkpoints of
//! 2017-2019 are in: five pickles one after another (a magic number, the format's
//! version, the machine's byte order, the state dict, its storages' keys), then each
//! storage as an 8-byte little-endian element count and its bytes.
//!
//! We read that subset: the zip archive (through the `zip` crate), the pickle opcodes
//! that `torch.save` emits (protocol 2, from Python 2 or 3: the `pickle` module
//! beside this one), and the globals a state dict names. tch's own loader stops with
//! an internal assert on the `OrderedDict` (with its `_metadata`) that `state_dict()`
//! returns, which is why this module exists.
//!
//! Every number in the file is checked before it sizes anything, and what a pickle
//! builds is bounded by its length, so a damaged or crafted file is an error, never a
//! panic, a stack overflow or an exhausted memory.

mod pickle;

use std::collections::HashMap;
use std::io::{Cursor, Read};
use std::path::Path;

use tch::{Kind, Tensor};
use zip::result::ZipError;
use zip::CompressionMethod;

use crate::error::{Error, Result};
use pickle::{Unpickler, Value};

/// Reads the state dict saved at `path`: parameter names with their tensors, in the
/// file's order.
pub fn read_state_dict(path: &Path) -> Result<Vec<(String, Tensor)>> {
    let bytes = crate::files::read(path).map_err(|source| Error::Io {
        action: "read the checkpoint",
        path: path.to_path_buf(),
        cause: source,
    })?;
    parse_state_dict(&bytes)
        .map_err(|reason| Error::CorruptCheckpoint { path: path.to_path_buf(), reason })
}

/// Parses the bytes of a `torch.save` file; the error says what is wrong with it.
fn parse_state_dict(bytes: &[u8]) -> Result<Vec<(String, Tensor)>, String> {
    // A zip archive starts with a local file header, a pickle with its PROTO opcode.
    match bytes.first_chunk() {
        Some(b"PK\x03\x04") => parse_zip(bytes),
        Some([0x80, ..]) => parse_legacy(bytes),
        _ => Err("it is neither a torch.save file nor safetensors".into()),
    }
}

/// Parses the zip format of PyTorch 1.6 and later.
fn parse_zip(bytes: &[u8]) -> Result<Vec<(String, Tensor)>, String> {
    let mut archive = Archive::open(bytes)?;
    let pickle_name = archive
        .names()
        .find(|name| name.ends_with("data.pkl"))
        .ok_or("the archive has no data.pkl, so it was not written by torch.save")?
        .to_string();
    let prefix = &pickle_name[..pickle_name.len() - "data.pkl".len()];
    if let Some(order) = archive.entry(&format!("{prefix}byteorder")) {
        if order?.as_slice() != b"little" {
            return Err("its tensors are stored big-endian, which is not supported".into());
        }
    }
    let pickle = archive.entry(&pickle_name).ok_or("its data.pkl is missing")??;
    zip_state_dict(&mut archive, prefix, &pickle)
}

/// The tensors of the state dict that `pickle`, the archive's data.pkl, describes,
/// each read from its storage at `<prefix>data/<key>`.
fn zip_state_dict(
    archive: &mut Archive,
    prefix: &str,
    pickle: &[u8],
) -> Result<Vec<(String, Tensor)>, String> {
    let state = Unpickler::new(pickle, "data.pkl").run()?.value;
    let entries = state_dict_entries(state)?;
    let mut storages = HashMap::new();
    for (name, layout) in &entries {
        let key = &layout.storage.key;
        if !storages.contains_key(key) {
            let storage = archive
                .entry(&format!("{prefix}data/{key}"))
                .ok_or_else(|| format!("the storage of {} is missing", shown(name)))??;
            storages.insert(key.clone(), storage);
        }
    }
    materialize_all(entries, &storages, archive.length)
}

/// The names and layouts of a state dict's tensors, in its order.
fn state_dict_entries(state: Value) -> Result<Vec<(String, TensorLayout)>, String> {
    let Value::Dict(items) = state else {
        return Err(format!("it holds {}, not a state dict", state.describe()));
    };
    let mut entries = Vec::with_capacity(items.values.len() / 2);
    let mut items = items.values.into_iter();
    while let (Some(key), Some(value)) = (items.next(), items.next()) {
        let Value::Str(name) = key else {
            return Err(format!("a key of its state dict is {}, not a name", key.describe()));
        };
        let Value::Tensor(layout) = value else {
            return Err(format!(
                "{} is {}, not a tensor; save model.state_dict()",
                shown(&name),
                value.describe()
            ));
        };
        entries.push((name, *layout));
    }
    Ok(entries)
}

/// How many times over a state dict's tensors may hold its file's bytes. Tensors may
/// share a storage (tied weights), but a crafted file could name one storage a
/// million times to exhaust memory.
const TENSOR_BYTES_PER_FILE_BYTE: usize = 4;

/// Each tensor, read from its storage's bytes (by key in `storages`).
fn materialize_all<S: AsRef<[u8]>>(
    entries: Vec<(String, TensorLayout)>,
    storages: &HashMap<String, S>,
    file_length: usize,
) -> Result<Vec<(String, Tensor)>, String> {
    let allowance = file_length.saturating_mul(TENSOR_BYTES_PER_FILE_BYTE);
    let mut total = 0usize;
    let mut tensors = Vec::with_capacity(entries.len());
    for (name, layout) in entries {
        let storage = storages
            .get(&layout.storage.key)
            .ok_or_else(|| format!("the storage of {} is missing", shown(&name)))?;
        let tensor = layout
            .storage
            .select(storage.as_ref())
            .and_then(|storage| layout.materialize(storage))
            .map_err(|why| format!("{}: {why}", shown(&name)))?;
        total = total.saturating_add(tensor.numel() * layout.storage.kind.elt_size_in_bytes());
        if total > allowance {
            return Err(format!(
                "its tensors would take over {TENSOR_BYTES_PER_FILE_BYTE} times the file's size \
                 (storages shared by too many tensors)"
            ));
        }
        tensors.push((name, tensor));
    }
    Ok(tensors)
}

/// How the legacy format begins: its magic number 0x1950a86a20f9469cfc6c pickled
/// (protocol 2, as a 10-byte LONG1), up to the STOP opcode.
const LEGACY_MAGIC: &[u8] = b"\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.";

/// The version of the legacy format that every PyTorch from 0.1.10 to today writes.
const LEGACY_VERSION: i64 = 1001;

const STORAGES_CUT_SHORT: &str = "its storages are cut short (was the file copied completely?)";

/// Parses the legacy format of PyTorch before 1.6.
fn parse_legacy(bytes: &[u8]) -> Result<Vec<(String, Tensor)>, String> {
    if !bytes.starts_with(LEGACY_MAGIC) {
        return Err("it is a pickle without torch.save's magic number, so not a checkpoint \
                    torch.save wrote"
            .into());
    }
    let mut position = LEGACY_MAGIC.len();
    let mut next_pickle = |name: &'static str| {
        let pickled = Unpickler::new(&bytes[position..], name).run()?;
        position += pickled.length;
        Ok::<_, String>((pickled.value, pickled.storages))
    };
    match next_pickle("format version")?.0 {
        Value::Int(LEGACY_VERSION) => {}
        Value::Int(version) => {
            return Err(format!("its legacy format version is {version}, not {LEGACY_VERSION}"))
        }
        other => return Err(format!("its legacy format version is {}", other.describe())),
    }
    let (system, _) = next_pickle("system information")?;
    if little_endian(&system) == Some(false) {
        return Err("its tensors are stored big-endian, which is not supported".into());
    }
    let (state, described) = next_pickle("pickle")?;
    let (keys, _) = next_pickle("storage list")?;
    let Value::List(keys) = keys else {
        return Err(format!("its storage list is {}, not a list", keys.describe()));
    };
    let mut storages = HashMap::new();
    for key in keys.values {
        let Value::Str(key) = key else {
            return Err(format!("its storage list holds {}, not a key", key.describe()));
        };
        let &(kind, elements) = described.get(&key).ok_or_else(|| {
            format!("its storage {} is stored but no tensor uses it", shown(&key))
        })?;
        let count = bytes
            .get(position..position + 8)
            .ok_or(STORAGES_CUT_SHORT)?
            .try_into()
            .map(u64::from_le_bytes)
            .map_err(|_| STORAGES_CUT_SHORT)?;
        if count != elements {
            return Err(format!(
                "its storage {} holds {count} elements where its pickle says {elements}",
                shown(&key)
            ));
        }
        let length = usize::try_from(count)
            .ok()
            .and_then(|count| count.checked_mul(kind.elt_size_in_bytes()))
            .ok_or(STORAGES_CUT_SHORT)?;
        let start = position + 8;
        let data = start
            .checked_add(length)
            .and_then(|end| bytes.get(start..end))
            .ok_or(STORAGES_CUT_SHORT)?;
        position = start + length;
        storages.insert(key, data);
    }
    let entries = state_dict_entries(state)?;
    materialize_all(entries, &storages, bytes.len())
}

/// The `little_endian` entry of the legacy format's system information.
fn little_endian(system: &Value) -> Option<bool> {
    let Value::Dict(items) = system else { return None };
    items.values.chunks_exact(2).find_map(|pair| match pair {
        [Value::Str(key), Value::Bool(value)] if key == "little_endian" => Some(*value),
        _ => None,
    })
}

/// A torch.save zip archive, read through the `zip` crate (which also reads the
/// zip64 records PyTorch writes).
struct Archive<'a> {
    zip: zip::ZipArchive<Cursor<&'a [u8]>>,
    length: usize,
}

const TRUNCATED: &str = "the zip archive is cut short (was the file copied completely?)";

impl<'a> Archive<'a> {
    fn open(bytes: &'a [u8]) -> Result<Self, String> {
        let zip = zip::ZipArchive::new(Cursor::new(bytes)).map_err(zip_reason)?;
        Ok(Archive { zip, length: bytes.len() })
    }

    fn names(&self) -> impl Iterator<Item = &str> {
        self.zip.file_names()
    }

    /// The contents of entry `name`, checked against its CRC; `None` if there is none.
    fn entry(&mut self, name: &str) -> Option<Result<Vec<u8>, String>> {
        let length = self.length;
        match self.zip.by_name(name) {
            Ok(file) => Some(read_entry(file, length as u64)),
            Err(ZipError::FileNotFound) => None,
            Err(err) => Some(Err(zip_reason(err))),
        }
    }
}

fn read_entry(mut file: zip::read::ZipFile, archive_length: u64) -> Result<Vec<u8>, String> {
    // Anything but stored data would be decompressed, and a crafted entry could
    // expand to any size.
    if file.compression() != CompressionMethod::Stored {
        return Err(format!(
            "{} is compressed; torch.save stores entries uncompressed",
            shown(file.name())
        ));
    }
    // A cut file is named as such rather than as failing its checksum.
    let end = file.data_start().checked_add(file.compressed_size());
    if end.is_none_or(|end| end > archive_length) {
        return Err(TRUNCATED.into());
    }
    let mut data = Vec::with_capacity(file.compressed_size() as usize);
    // Reading from memory, within the archive, fails only on the CRC check that the
    // zip crate makes at the entry's end.
    file.read_to_end(&mut data)
        .map_err(|_| format!("{} fails its checksum; the file is damaged", shown(file.name())))?;
    if data.len() as u64 != file.size() {
        return Err(format!("its zip directory gives {} the wrong size", shown(file.name())));
    }
    Ok(data)
}

/// A one-line reason for what the zip crate found wrong.
fn zip_reason(err: ZipError) -> String {
    match err {
        // The end-of-directory record is the archive's last 22 bytes or more, so a
        // cut file lacks it ("invalid zip header": shorter than that). The archive is
        // read from memory, so an I/O error is a seek or read past its end, as in a
        // file shorter than its records say.
        ZipError::InvalidArchive("Could not find central directory end" | "Invalid zip header")
        | ZipError::Io(_) => TRUNCATED.into(),
        ZipError::InvalidArchive(why) => {
            format!("its zip archive is damaged ({})", why.to_lowercase())
        }
        ZipError::UnsupportedArchive(why) => {
            format!("its zip archive is not a kind torch.save writes ({})", why.to_lowercase())
        }
        ZipError::FileNotFound => "its zip archive lacks an entry it lists".into(),
    }
}

/// A storage that tensors read from, as `persistent_load` resolves it.
#[derive(Clone, Debug)]
struct StorageRef {
    key: String,
    kind: Kind,
    /// The elements it sees of the storage stored under `key`, offset and count, when
    /// it is a view (which PyTorch before 0.4 wrote in the legacy format).
    view: Option<(usize, usize)>,
}

impl StorageRef {
    /// The bytes it sees of `stored`, the bytes stored under its key.
    fn select<'s>(&self, stored: &'s [u8]) -> Result<&'s [u8], String> {
        let Some((offset, elements)) = self.view else { return Ok(stored) };
        let size = self.kind.elt_size_in_bytes();
        offset
            .checked_add(elements)
            .and_then(|end| stored.get(offset.checked_mul(size)?..end.checked_mul(size)?))
            .ok_or_else(|| "its storage view reaches past the end of its storage".into())
    }
}

/// Where a tensor's elements lie in its storage, as `_rebuild_tensor_v2` records it.
#[derive(Clone, Debug)]
struct TensorLayout {
    storage: StorageRef,
    offset: i64,
    size: Vec<i64>,
    stride: Vec<i64>,
}

impl TensorLayout {
    /// A contiguous tensor holding the elements the layout selects from `storage`.
    ///
    /// Every number comes from the file, so the layout is checked first, in 64-bit
    /// arithmetic that refuses to overflow: it must select no more elements than the
    /// storage holds (a stride of 0 would otherwise repeat one element into terabytes)
    /// and reach none beyond its end.
    fn materialize(&self, storage: &[u8]) -> Result<Tensor, String> {
        let kind = self.storage.kind;
        let element_size = kind.elt_size_in_bytes();
        let elements = storage.len() / element_size;
        if self.size.len() != self.stride.len() {
            return Err("its size and stride differ in length".into());
        }
        if self.offset < 0 || self.size.iter().chain(&self.stride).any(|&value| value < 0) {
            return Err("its layout has a negative size, stride or offset".into());
        }
        let count = self.size.iter().try_fold(1u64, |count, &size| count.checked_mul(size as u64));
        let count = match count {
            None => return Err("its element count overflows".into()),
            Some(0) => {
                return Tensor::f_zeros(self.size.as_slice(), (kind, tch::Device::Cpu))
                    .map_err(torch_reason)
            }
            Some(count) if count > elements as u64 => {
                return Err(format!("it has {count} elements, its storage only {elements}"))
            }
            Some(count) => count as usize,
        };
        // The furthest element the layout reaches, offset + sum((size - 1) * stride);
        // no size is 0 here.
        let last = self.size.iter().zip(&self.stride).try_fold(
            self.offset as u64,
            |last, (&size, &stride)| {
                last.checked_add((size as u64 - 1).checked_mul(stride as u64)?)
            },
        );
        if last.is_none_or(|last| last >= elements as u64) {
            return Err("its shape reaches past the end of its storage".into());
        }
        if self.is_contiguous() {
            // What torch.save writes for a parameter: one copy, of just its elements.
            let start = self.offset as usize * element_size;
            let end = start + count * element_size;
            return Tensor::f_from_data_size(&storage[start..end], &self.size, kind)
                .map_err(torch_reason);
        }
        let flat =
            Tensor::f_from_data_size(&storage[..elements * element_size], &[elements as i64], kind)
                .map_err(torch_reason)?;
        flat.f_as_strided(self.size.as_slice(), self.stride.as_slice(), self.offset)
            .and_then(|tensor| tensor.f_contiguous())
            .map_err(torch_reason)
    }

    /// Whether the elements lie one after another in row-major order (dimensions of
    /// size 1 may have any stride).
    fn is_contiguous(&self) -> bool {
        let mut expected = 1;
        for (&size, &stride) in self.size.iter().zip(&self.stride).rev() {
            if size != 1 && stride != expected {
                return false;
            }
            expected *= size;
        }
        true
    }
}

/// Text from the file (a name, a key) fit for a one-line message: at most 60
/// characters, control characters and line breaks escaped.
fn shown(text: &str) -> String {
    const LIMIT: usize = 60;
    let mut shown: String = text.chars().take(LIMIT).flat_map(char::escape_debug).collect();
    if text.chars().nth(LIMIT).is_some() {
        shown.push_str("...");
    }
    shown
}

/// libtorch's reason, without the C++ backtrace that follows its first line.
fn torch_reason(err: tch::TchError) -> String {
    format!("libtorch refused it: {}", err.to_string().lines().next().unwrap_or(""))
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;
    use crate::fuzz::fuzz;
    use crate::model::{ActorCritic, Body, Head, ModelSpec};

    /// Runs a pickle to its STOP.
    fn unpickle(bytes: &[u8]) -> Result<Value, String> {
        Unpickler::new(bytes, "data.pkl").run().map(|pickled| pickled.value)
    }

    fn float_layout(size: Vec<i64>, stride: Vec<i64>) -> TensorLayout {
        TensorLayout {
            storage: StorageRef { key: "0".into(), kind: Kind::Float, view: None },
            offset: 0,
            size,
            stride,
        }
    }

    /// Strides and an offset select elements from a storage; a layout reaching past
    /// the storage is refused rather than read out of bounds.
    #[test]
    fn layouts_select_from_storage() {
        let storage: Vec<u8> = (0..6).flat_map(|value| (value as f32).to_le_bytes()).collect();
        let transposed = float_layout(vec![3, 2], vec![1, 3]);
        let tensor = transposed.materialize(&storage).unwrap();
        assert_eq!(
            Vec::<f32>::try_from(tensor.view([-1])).unwrap(),
            [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]
        );
        let past_end = TensorLayout { offset: 1, ..transposed.clone() };
        assert!(past_end.materialize(&storage).unwrap_err().contains("past the end"));
        let empty = TensorLayout { size: vec![0, 2], ..transposed };
        assert_eq!(empty.materialize(&storage).unwrap().size(), [0, 2]);
        // Contiguous, with an offset and a dimension of size 1 of any stride.
        let row = TensorLayout { offset: 3, ..float_layout(vec![1, 3], vec![7, 1]) };
        let tensor = row.materialize(&storage).unwrap();
        assert_eq!(tensor.size(), [1, 3]);
        assert_eq!(Vec::<f32>::try_from(tensor.view([-1])).unwrap(), [3.0, 4.0, 5.0]);
    }

    /// Layouts whose sizes would need more memory than the file holds, or whose
    /// arithmetic overflows 64 bits, are refused. Before, a stride of 0 with a size of
    /// 2^40 panicked in libtorch (asking for 4 TiB), and overflowing products wrapped.
    #[test]
    fn oversized_layouts_are_refused() {
        let storage = [0u8; 16];
        for (size, stride, reason) in [
            (vec![1 << 40], vec![0], "its storage only 4"),
            (vec![1 << 32, 1 << 32], vec![0, 0], "overflows"),
            (vec![i64::MAX, i64::MAX], vec![1, 1], "overflows"),
            (vec![i64::MAX, 2], vec![0, 0], "its storage only 4"),
            (vec![2, 2], vec![1 << 62, 1 << 62], "past the end"),
            (vec![2, 2], vec![i64::MAX, 1], "past the end"),
            (vec![2], vec![-1], "negative"),
            (vec![-2, -2], vec![1, 1], "negative"),
            (vec![2, 2], vec![1], "differ in length"),
        ] {
            let layout = float_layout(size, stride);
            let message = layout.materialize(&storage).unwrap_err();
            assert!(message.contains(reason), "{layout:?}: {message}");
        }
        let past_end = TensorLayout { offset: i64::MAX, ..float_layout(vec![2], vec![1]) };
        assert!(past_end.materialize(&storage).unwrap_err().contains("past the end"));
    }

    /// A storage named by a million tensors is refused once the tensors would take
    /// more than a few times the file's size.
    #[test]
    fn storages_shared_too_often_are_refused() {
        let storage: Vec<u8> = vec![0; 4096];
        let storages = HashMap::from([("0".to_string(), storage)]);
        let entries: Vec<_> = (0..1_000_000)
            .map(|index| (format!("t{index}"), float_layout(vec![1024], vec![1])))
            .collect();
        let message = materialize_all(entries, &storages, 4096).unwrap_err();
        assert!(message.contains("times the file's size"), "{message}");
    }

    fn fixture(name: &str) -> Vec<u8> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name);
        fs::read(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
    }

    /// A zip-format file that is cut short, has a damaged byte, or has a compressed
    /// entry is refused with a reason naming that.
    #[test]
    fn zip_damage_is_named() {
        let dat = fixture("reference_hidden16.dat");
        assert_eq!(parse_state_dict(&dat).unwrap().len(), 16);
        for length in [10, 100, dat.len() / 2, dat.len() - 10] {
            let message = parse_state_dict(&dat[..length]).unwrap_err();
            assert!(message.contains("cut short"), "{length} bytes: {message}");
        }
        let mut damaged = dat.clone();
        damaged[dat.len() / 2] ^= 0x40;
        let message = parse_state_dict(&damaged).unwrap_err();
        assert!(message.contains("data/") && message.contains("checksum"), "{message}");
        // The central directory's first entry (data.pkl) marked deflated (method 8).
        let mut deflated = dat.clone();
        let directory = dat.windows(4).position(|window| window == b"PK\x01\x02").unwrap();
        deflated[directory + 10] = 8;
        let message = parse_state_dict(&deflated).unwrap_err();
        assert!(message.contains("data.pkl is compressed"), "{message}");
    }

    /// What is not a zip-format torch.save file gets a reason, not a panic.
    #[test]
    fn foreign_bytes_are_refused() {
        let legacy = [LEGACY_MAGIC, b"rest"].concat();
        assert!(parse_state_dict(&legacy).unwrap_err().contains("format version"));
        assert!(parse_state_dict(b"\x80\x02N.").unwrap_err().contains("magic number"));
        assert!(parse_state_dict(b"{\"json\": 1}").unwrap_err().contains("neither"));
        assert!(parse_state_dict(b"").unwrap_err().contains("neither"));
        assert!(parse_state_dict(b"PK\x03\x04 and then nothing")
            .unwrap_err()
            .contains("cut short"));
    }

    /// Names and keys from the file reach messages escaped and cut, so that a crafted
    /// one cannot break the error's single line or flood the terminal.
    #[test]
    fn file_text_in_reasons_is_escaped_and_cut() {
        assert_eq!(shown("conv1.weight"), "conv1.weight");
        assert_eq!(shown("a\nb\u{1b}[2J"), "a\\nb\\u{1b}[2J");
        assert_eq!(shown(&"x".repeat(1000)), format!("{}...", "x".repeat(60)));
        let global =
            b"\x80\x02cmodule\nname\rwith a very long name that goes on and on and on\n)R.";
        let message = unpickle(global).unwrap_err();
        assert!(message.contains("name\\rwith") && message.len() < 160, "{message}");
    }

    /// The legacy-format fixture holds exactly the zip-format fixture's tensors, in
    /// the same order (tests/fixtures/make_legacy_fixture.py).
    #[test]
    fn legacy_fixture_matches_the_zip_fixture() {
        let legacy = parse_state_dict(&fixture("reference_hidden16_legacy.dat")).unwrap();
        let zipped = parse_state_dict(&fixture("reference_hidden16.dat")).unwrap();
        assert_eq!(legacy.len(), 16);
        for ((legacy_name, legacy), (zipped_name, zipped)) in legacy.iter().zip(&zipped) {
            assert_eq!(legacy_name, zipped_name);
            assert!(legacy.equal(zipped), "{legacy_name}");
        }
    }

    /// A legacy file as Python 2 and PyTorch 0.3 wrote one, by hand: names as Python 2
    /// str (SHORT_BINSTRING), the OrderedDict pickled as a call on its [key, value]
    /// pairs, `_rebuild_tensor`, storages on a GPU, one of them a view.
    fn python2_legacy_file(count: u64, version: &[u8], little_endian: u8) -> Vec<u8> {
        let storage = |view: &[u8]| {
            [&b"(U\x07storagectorch.cuda\nFloatStorage\nU\x011U\x06cuda:0K\x06"[..], view, b"tQ"]
                .concat()
        };
        let tensor = |storage: Vec<u8>, size_and_stride: &[u8]| {
            [&b"ctorch._utils\n_rebuild_tensor\n("[..], &storage, b"K\x00", size_and_stride, b"tR"]
                .concat()
        };
        let weight = tensor(storage(b"N"), b"(K\x02K\x03t(K\x03K\x01t");
        let view = tensor(storage(b"(U\x012K\x02K\x04t"), b"(K\x04t(K\x01t");
        let state = [
            &b"\x80\x02ccollections\nOrderedDict\nq\x00](]q\x01(U\x06weight"[..],
            &weight,
            b"e](U\x04view",
            &view,
            b"ee\x85R}U\x09_metadata}sb.",
        ]
        .concat();
        let system = [&b"\x80\x02}(U\x0dlittle_endian"[..], &[little_endian], b"u."].concat();
        let data: Vec<u8> = (0..6).flat_map(|value| (value as f32).to_le_bytes()).collect();
        [
            LEGACY_MAGIC,
            &[b"\x80\x02M", version, b"."].concat(),
            &system,
            &state,
            b"\x80\x02]q\x00U\x011a.",
            &count.to_le_bytes(),
            &data,
        ]
        .concat()
    }

    /// Python 2's legacy files read: the tensor, and the view of its storage.
    #[test]
    fn legacy_python2_file_reads() {
        let tensors = parse_state_dict(&python2_legacy_file(6, b"\xe9\x03", 0x88)).unwrap();
        let names: Vec<&str> = tensors.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(names, ["weight", "view"]);
        assert_eq!(tensors[0].1.size(), [2, 3]);
        let values = |tensor: &Tensor| Vec::<f32>::try_from(tensor.view([-1])).unwrap();
        assert_eq!(values(&tensors[0].1), [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!(values(&tensors[1].1), [2.0, 3.0, 4.0, 5.0]);
    }

    /// A legacy file that is cut anywhere, big-endian, of another format version, or
    /// whose storage disagrees with its pickle gets a reason.
    #[test]
    fn legacy_damage_is_named() {
        let file = python2_legacy_file(6, b"\xe9\x03", 0x88);
        for length in 1..file.len() {
            assert!(parse_state_dict(&file[..length]).is_err(), "cut at {length}");
        }
        let message = parse_state_dict(&file[..file.len() - 1]).unwrap_err();
        assert!(message.contains("cut short"), "{message}");
        let message = parse_state_dict(&python2_legacy_file(6, b"\xe9\x03", 0x89)).unwrap_err();
        assert!(message.contains("big-endian"), "{message}");
        let message = parse_state_dict(&python2_legacy_file(6, b"\xe8\x03", 0x88)).unwrap_err();
        assert!(message.contains("version is 1000"), "{message}");
        let message = parse_state_dict(&python2_legacy_file(7, b"\xe9\x03", 0x88)).unwrap_err();
        assert!(message.contains("holds 7 elements where its pickle says 6"), "{message}");
        let message =
            parse_state_dict(&python2_legacy_file(u64::MAX, b"\xe9\x03", 0x88)).unwrap_err();
        assert!(message.contains("holds 18446744073709551615 elements"), "{message}");
    }

    /// Thousands of seeded random mutations of valid checkpoints (the zip-format and
    /// legacy fixtures, the zip fixture's data.pkl alone, and a small a3g safetensors
    /// file) each read to Ok or Err, without a panic, abort or stack overflow, within
    /// two seconds; about 5 s in all on two busy cores (`--nocapture` prints the times).
    #[test]
    fn mutated_checkpoints_read_or_fail_cleanly() {
        let zipped = fixture("reference_hidden16.dat");
        let directory = zipped.windows(4).position(|window| window == b"PK\x01\x02").unwrap();
        let read_well =
            fuzz("zip", 1, 1000, &zipped, &[0..256, directory..zipped.len()], |bytes| {
                parse_state_dict(bytes)
            });
        assert!(read_well > 0, "some damage (to tensor bytes' checksums) only changes values");

        // Within the archive, data.pkl's checksum would refuse nearly every change to
        // it, so the pickle is damaged after the archive is checked.
        let mut archive = Archive::open(&zipped).unwrap();
        let pickle = archive.entry("reference_hidden16/data.pkl").unwrap().unwrap();
        fuzz("data.pkl", 2, 1500, &pickle, &[], |pickle| {
            zip_state_dict(&mut archive, "reference_hidden16/", pickle)
        });

        let legacy = fixture("reference_hidden16_legacy.dat");
        // The pickles take the first 2219 bytes; each storage's count precedes it.
        let pickles = 0..2219;
        fuzz("legacy", 3, 1500, &legacy, &[pickles], parse_state_dict);

        let vs = tch::nn::VarStore::new(tch::Device::Cpu);
        let spec = ModelSpec {
            body: Body::Mlp { inputs: 4, lstm: true, input_norm: None },
            hidden_size: 8,
            head: Head::Discrete { actions: 2 },
        };
        let model = ActorCritic::new(&vs, &spec);
        let dir = std::env::temp_dir().join(format!("a3g-unit-fuzz-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("CartPole-v1.safetensors");
        Tensor::write_safetensors(model.parameters(), &path).unwrap();
        let safetensors = fs::read(&path).unwrap();
        let header = 0..8 + u64::from_le_bytes(safetensors[..8].try_into().unwrap()) as usize;
        fuzz("safetensors", 4, 1000, &safetensors, &[header], |bytes| {
            fs::write(&path, bytes).unwrap();
            match crate::checkpoint::read_model(&path) {
                // That reason means tch panicked, and the panic was printed.
                Err(err) => {
                    assert!(!err.to_string().contains("unreadable safetensors data"), "{err}");
                    Err(err.to_string())
                }
                Ok(tensors) => Ok(tensors),
            }
        });
        fs::remove_dir_all(&dir).unwrap();
    }
}
