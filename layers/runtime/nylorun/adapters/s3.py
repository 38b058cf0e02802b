"""The file store on S3: one versioned, private bucket; objects keyed by owner and context; presigned GETs."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from nylorun.ports import REFUSED_TAG, FileStore, StoredObject


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


def _b64(raw: bytes) -> str:
    import base64

    return base64.b64encode(raw).decode()


if TYPE_CHECKING:  # mypy fails here when the port changes and this adapter does not follow
    _store: FileStore = S3FileStore(None, "")
