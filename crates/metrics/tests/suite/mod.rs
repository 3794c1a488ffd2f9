mod aggregate;
mod formulas;
mod histogram;
mod lines;
mod outputs;
mod recorder;
mod util;
