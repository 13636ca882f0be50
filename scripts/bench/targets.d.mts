export interface TargetRow {
  target: string;
  figure: string;
  met: 'met' | 'NOT met';
}
export declare function targetRows(dir: string, since: number): TargetRow[];
