/** The node flags a service runs with (the Helm chart's `<service>.nodeOptions`, else `serviceDefaults.nodeOptions`). */
export function nodeOptionsOf(service: string): string[];
