"""The file store on S3: one versioned, private bucket; objects keyed by owner and context; presigned GETs."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from nylorun.ports import REFUSED_TAG, FileStore, StoredObject, StoreUnavailable


class S3FileStore:
    def __init__(self, client: Any, bucket: str) -> None:
        self._s3 = client
        self._bucket = bucket

    def put(self, key: str, data: bytes, media_type: str) -> StoredObject:
        digest = hashlib.sha256(data).hexdigest()
        out = self._s3.put_object(
            Bucket=self._bucket,
            Key=key,
            Body=data,
            ContentType=media_type,
            ChecksumSHA256=_b64(hashlib.sha256(data).digest()),  # S3 verifies what it stored
            Metadata={"sha256": digest},
        )
        return StoredObject(key=key, version_id=str(out.get("VersionId") or "null"), size=len(data), sha256=digest)

    def get(self, key: str, version_id: str) -> bytes:
        out = self._s3.get_object(Bucket=self._bucket, Key=key, VersionId=version_id)
        return bytes(out["Body"].read())

    def presign(self, key: str, version_id: str, expires_seconds: int, filename: str | None = None) -> str:
        params: dict[str, Any] = {"Bucket": self._bucket, "Key": key, "VersionId": version_id}
        if filename:
            params["ResponseContentDisposition"] = f'attachment; filename="{filename}"'
        return str(self._s3.generate_presigned_url("get_object", Params=params, ExpiresIn=expires_seconds))

    def mark_refused(self, key: str, version_id: str) -> None:
        # The version's own tags (PutObjectTagging with VersionId): the lifecycle rule filters on them.
        tag_key, tag_value = REFUSED_TAG
        self._s3.put_object_tagging(
            Bucket=self._bucket, Key=key, VersionId=version_id,
            Tagging={"TagSet": [{"Key": tag_key, "Value": tag_value}]},
        )

    def delete_versions(self, versions: Sequence[tuple[str, str]]) -> None:
        # DeleteObjects takes at most 1,000 keys a request
        # (https://docs.aws.amazon.com/AmazonS3/latest/API/API_DeleteObjects.html); a version id deletes that version
        # for good (no delete marker), and one already gone is not an error.
        for start in range(0, len(versions), 1000):
            chunk = versions[start : start + 1000]
            out = self._s3.delete_objects(
                Bucket=self._bucket,
                Delete={"Objects": [{"Key": k, "VersionId": v} for k, v in chunk], "Quiet": True},
            )
            if out.get("Errors"):  # e.g. AccessDenied: raised, so the expiry is retried
                first = out["Errors"][0]
                raise StoreUnavailable(f"S3 kept {len(out['Errors'])} versions: {first.get('Code')} {first.get('Key')}")


def _b64(raw: bytes) -> str:
    import base64

    return base64.b64encode(raw).decode()


if TYPE_CHECKING:  # mypy fails here when the port changes and this adapter does not follow
    _store: FileStore = S3FileStore(None, "")
