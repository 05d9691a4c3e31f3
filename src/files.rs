//! Reading the files a user names: never a device, so that a path to one (a symlink
//! to /dev/zero, say) is refused at once instead of read without end. Pipes are read
//! to their end as files are (`a3g plot <(ssh host cat log)`). And making the folders
//! a user names, saying what stands in the way when one cannot be made.

use std::fs::{File, FileType};
use std::io::{self, Read};
use std::os::unix::fs::FileTypeExt;
use std::path::Path;

/// `std::fs::read`, refusing a device.
pub fn read(path: &Path) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    open_unless_device(path)?.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// `std::fs::read_to_string`, refusing a device.
pub fn read_to_string(path: &Path) -> io::Result<String> {
    let mut text = String::new();
    open_unless_device(path)?.read_to_string(&mut text)?;
    Ok(text)
}

/// `std::fs::create_dir_all`, naming what the path is when it is there but is not a
/// folder, where the standard library says only "File exists" (a file, or a symbolic
/// link that loops or leads nowhere).
pub fn create_dir_all(path: &Path) -> io::Result<()> {
    let Err(failure) = std::fs::create_dir_all(path) else { return Ok(()) };
    if failure.kind() != io::ErrorKind::AlreadyExists {
        return Err(failure);
    }
    match std::fs::metadata(path) {
        Err(following) if path.is_symlink() => Err(io::Error::new(
            following.kind(),
            format!(
                "it is a symbolic link that cannot be followed ({})",
                crate::error::os_reason(&following)
            ),
        )),
        Err(following) => Err(following),
        Ok(metadata) => Err(io::Error::new(
            io::ErrorKind::NotADirectory,
            if is_device(metadata.file_type()) {
                "it is a device, not a folder"
            } else {
                "it is a file, not a folder"
            },
        )),
    }
}

/// Whether `kind` is a character or block device, which never ends when read.
pub fn is_device(kind: FileType) -> bool {
    kind.is_char_device() || kind.is_block_device()
}

/// Opens `path` and checks what was opened, so the path cannot change in between.
fn open_unless_device(path: &Path) -> io::Result<File> {
    let file = File::open(path)?;
    if is_device(file.metadata()?.file_type()) {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "it is a device, not a file"));
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_are_refused_and_files_read() {
        let dir = std::env::temp_dir().join(format!("a3g-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("log");
        std::fs::write(&file, "a line\n").unwrap();
        let link = dir.join("zeros");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        assert_eq!(read_to_string(&file).unwrap(), "a line\n");
        assert_eq!(read(&file).unwrap(), b"a line\n");
        let device = read(&link).unwrap_err();
        assert_eq!(device.kind(), io::ErrorKind::InvalidInput, "{device}");
        assert!(device.to_string().contains("a device, not a file"), "{device}");
        let folder = read_to_string(&dir).unwrap_err();
        assert_eq!(folder.kind(), io::ErrorKind::IsADirectory, "{folder}");
        let missing = read(&dir.join("missing")).unwrap_err();
        assert_eq!(missing.kind(), io::ErrorKind::NotFound);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A folder that cannot be made because something is at its path says what: a
    /// file, or a symbolic link that loops; a new nested folder is made.
    #[test]
    fn folders_in_the_way_are_named() {
        let dir = std::env::temp_dir().join(format!("a3g-folders-{}", std::process::id()));
        create_dir_all(&dir.join("new/nested")).unwrap();
        assert!(dir.join("new/nested").is_dir());
        std::fs::write(dir.join("file"), "").unwrap();
        let file = create_dir_all(&dir.join("file")).unwrap_err();
        assert!(file.to_string().contains("it is a file, not a folder"), "{file}");
        let device = create_dir_all(Path::new("/dev/null")).unwrap_err();
        assert!(device.to_string().contains("it is a device, not a folder"), "{device}");
        assert_eq!(
            crate::error::Error::Io { action: "create", path: "/dev/null".into(), cause: device }
                .to_string(),
            "cannot create /dev/null: it is a device, not a folder; pass a path that is a folder or can be made one"
        );
        std::os::unix::fs::symlink(dir.join("loop"), dir.join("loop")).unwrap();
        let looped = create_dir_all(&dir.join("loop")).unwrap_err();
        assert!(looped.to_string().contains("symbolic link that cannot be followed"), "{looped}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
