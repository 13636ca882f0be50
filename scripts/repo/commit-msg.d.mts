export declare const MAX_SUBJECT: number;
export declare const SCOPES: readonly string[];
export declare function commitMessageProblems(message: string): string[];
