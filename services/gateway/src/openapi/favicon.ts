/**
 * The API's favicon, drawn here rather than kept as a binary file: a 32×32 ICO (one 32-bit BMP
 * image) of a white check mark on the docs' blue, with transparent rounded corners.
 */

const SIZE = 32;
const BLUE = [0xbf, 0x5f, 0x1f, 0xff] as const; // BGRA of #1f5fbf
const WHITE = [0xff, 0xff, 0xff, 0xff] as const;
const CLEAR = [0, 0, 0, 0] as const;

/** Distance from the point to the segment a–b. */
function toSegment(px: number, py: number, ax: number, ay: number, bx: number, by: number): number {
  const [dx, dy] = [bx - ax, by - ay];
  const t = Math.max(0, Math.min(1, ((px - ax) * dx + (py - ay) * dy) / (dx * dx + dy * dy)));
  return Math.hypot(px - (ax + t * dx), py - (ay + t * dy));
}

function pixel(x: number, y: number): readonly number[] {
  const [cx, cy] = [x + 0.5, y + 0.5];
  // Rounded square: corners of radius 6.
  const r = 6;
  const qx = Math.max(r - cx, cx - (SIZE - r), 0);
  const qy = Math.max(r - cy, cy - (SIZE - r), 0);
  if (Math.hypot(qx, qy) > r) return CLEAR;
  // Check mark: two strokes 3.5 px wide.
  const d = Math.min(toSegment(cx, cy, 8, 17, 14, 23), toSegment(cx, cy, 14, 23, 25, 10));
  return d <= 1.75 ? WHITE : BLUE;
}

export function favicon(): Buffer {
  const pixels = Buffer.alloc(SIZE * SIZE * 4);
  // BMP rows run bottom-up.
  for (let y = 0; y < SIZE; y++) {
    for (let x = 0; x < SIZE; x++) pixels.set(pixel(x, SIZE - 1 - y), (y * SIZE + x) * 4);
  }
  const mask = Buffer.alloc((SIZE / 8) * SIZE); // AND mask, all zero: the alpha channel decides
  const info = Buffer.alloc(40);
  info.writeUInt32LE(40, 0); // BITMAPINFOHEADER size
  info.writeInt32LE(SIZE, 4);
  info.writeInt32LE(SIZE * 2, 8); // XOR image + AND mask
  info.writeUInt16LE(1, 12); // planes
  info.writeUInt16LE(32, 14); // bits per pixel
  info.writeUInt32LE(pixels.length + mask.length, 20);
  const image = Buffer.concat([info, pixels, mask]);
  const header = Buffer.alloc(6 + 16);
  header.writeUInt16LE(0, 0);
  header.writeUInt16LE(1, 2); // type: icon
  header.writeUInt16LE(1, 4); // one image
  header.writeUInt8(SIZE, 6);
  header.writeUInt8(SIZE, 7);
  header.writeUInt16LE(1, 10); // planes
  header.writeUInt16LE(32, 12); // bits per pixel
  header.writeUInt32LE(image.length, 14);
  header.writeUInt32LE(header.length, 18); // offset of the image
  return Buffer.concat([header, image]);
}
