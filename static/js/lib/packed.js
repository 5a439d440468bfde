// Packed arrays from the payload: {dtype: "float16", shape: [...], b64}. See docs/protocol.md.

function halfToFloat(h) {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >> 10) & 0x1f;
  const frac = h & 0x3ff;
  if (exp === 0) return sign * 2 ** -14 * (frac / 1024);
  if (exp === 31) return frac ? NaN : sign * Infinity;
  return sign * 2 ** (exp - 15) * (1 + frac / 1024);
}

/** Decode a packed array into {data: Float32Array, shape}. */
export function unpack(packed) {
  if (!packed) return null;
  const bytes = Uint8Array.from(atob(packed.b64), (c) => c.charCodeAt(0));
  const halves = new Uint16Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 2);
  const data = new Float32Array(halves.length);
  for (let i = 0; i < halves.length; i++) data[i] = halfToFloat(halves[i]);
  return { data, shape: packed.shape };
}

/** Row r of a 2-D (or the flattened leading dims of an N-D) unpacked array. */
export function row(array, r) {
  const width = array.shape[array.shape.length - 1];
  return array.data.subarray(r * width, (r + 1) * width);
}

/** Index into an unpacked N-D array. */
export function at(array, ...index) {
  let offset = 0;
  for (let i = 0; i < index.length; i++) offset = offset * array.shape[i] + index[i];
  return array.data[offset];
}
