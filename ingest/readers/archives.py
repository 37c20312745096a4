"""Zip archives (an import's .zip, a DOCX) opened only when their unpacked size is bounded: a few kilobytes
must not unpack into gigabytes (a zip bomb)."""
import io
import zipfile

UNPACKED_MAX_BYTES = 200 * 1024 * 1024  # everything inside, unpacked
MAX_RATIO = 200  # unpacked ÷ packed size of any one member of more than a megabyte


class ArchiveRefused(ValueError):
    field = "file"

    def __init__(self, message: str, *, not_a_zip: bool = False):
        super().__init__(message)
        self.not_a_zip = not_a_zip


def open_bounded(data: bytes, name: str = "the file") -> zipfile.ZipFile:
    """The archive, once its declared sizes pass the bounds; ArchiveRefused otherwise, or when it is not a zip.

    The sizes are the ones the archive declares; reading a member that inflates past its declared size fails
    inside zipfile (a CRC and length check), so the declared sizes bound what is read."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, ValueError) as exc:
        raise ArchiveRefused(f"{name} is not a zip file ({exc})", not_a_zip=True) from None
    members = archive.infolist()
    total = sum(member.file_size for member in members)
    if total > UNPACKED_MAX_BYTES:
        raise ArchiveRefused(f"{name} unpacks to {total:,} bytes, more than {UNPACKED_MAX_BYTES:,}")
    for member in members:
        if member.file_size > 1024 * 1024 and member.file_size > MAX_RATIO * max(member.compress_size, 1):
            raise ArchiveRefused(f"{name}: {member.filename} unpacks {member.file_size // max(member.compress_size, 1)}"
                                 f" times its packed size (a zip bomb?)")
    return archive
